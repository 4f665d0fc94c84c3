// Every message of the protocol, one struct per message type (docs/protocol.md).
#pragma once

#include "shared/protocol/model_messages.h"
#include "shared/protocol/producer_messages.h"
#include "shared/protocol/worker_messages.h"
