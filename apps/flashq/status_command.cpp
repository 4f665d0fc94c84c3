#include "apps/flashq/status_command.h"

#include <memory>

#include "apps/flashq/broker_options.h"
#include "apps/flashq/job_report.h"
#include "client/flashq_client.h"

namespace flashq {
namespace {

struct StatusOptions {
  std::string id;
  BrokerOptions broker;
};

int run_status(const StatusOptions& options) {
  Client client;
  connect_to_broker(client, options.broker);
  // A job the broker does not know is a valid answer (state "unknown"), printed like any other.
  print_json_line(status_json(client.status(options.id, options.broker.timeout_ms)));
  return 0;
}

}  // namespace

std::function<int()> add_status_command(CLI::App& app) {
  auto options = std::make_shared<StatusOptions>();
  CLI::App* cmd = app.add_subcommand("status", "print where a job stands as JSON");
  cmd->add_option("id", options->id, "job id")->required();
  add_broker_options(*cmd, options->broker);
  return [cmd, options] { return *cmd ? run_status(*options) : 0; };
}

}  // namespace flashq
