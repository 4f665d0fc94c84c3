#include "worker/text/jinja/builtins.h"

#include <ctime>

#include "worker/text/jinja/filters.h"
#include "worker/text/jinja/js_text.h"

namespace flashq::jinja {
namespace {

using Method = std::function<Value(const std::string& self, std::vector<Value>& args)>;

Value bind_string(const std::string& self, Method method) {
  return Value::from_function([self, method](std::vector<Value>& args, Scope&) { return method(self, args); });
}

// startswith/endswith take a string or a tuple of strings.
Value affix_test(const std::string& self, std::vector<Value>& args, bool prefix, const char* name) {
  if (args.empty()) fail(std::string(name) + "() requires at least one argument");
  const auto matches = [&](const std::string& affix) {
    if (affix.size() > self.size()) return false;
    return prefix ? self.compare(0, affix.size(), affix) == 0
                  : self.compare(self.size() - affix.size(), affix.size(), affix) == 0;
  };
  const Value& pattern = args[0];
  if (pattern.is(Kind::kString)) return Value::from_bool(matches(pattern.string));
  if (pattern.is_array()) {
    for (const Value& item : *pattern.array) {
      if (!item.is(Kind::kString)) fail(std::string(name) + "() tuple elements must be strings");
      if (matches(item.string)) return Value::from_bool(true);
    }
    return Value::from_bool(false);
  }
  fail(std::string(name) + "() argument must be a string or tuple of strings");
}

// Python's str.split(sep=None, maxsplit=-1) as the reference engine implements it.
Value split(const std::string& self, std::vector<Value>& args) {
  const Value sep = args.size() > 0 ? args[0] : Value::none();
  if (!sep.is(Kind::kString) && !sep.is(Kind::kNone)) fail("sep argument must be a string or null");
  const Value maxsplit_v = args.size() > 1 ? args[1] : Value::from_int(-1);
  if (!maxsplit_v.is(Kind::kInt)) fail("maxsplit argument must be a number");
  const double maxsplit = maxsplit_v.number;
  Array parts;
  if (sep.is(Kind::kNone)) {
    const std::string_view text = js_trim_start(self);
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = pos;
      while (end < text.size() && js_space_length(text, end) == 0) ++end;
      if (maxsplit != -1 && static_cast<double>(parts.size()) >= maxsplit) {
        parts.push_back(Value::from_string(std::string(text.substr(pos))));
        break;
      }
      parts.push_back(Value::from_string(std::string(text.substr(pos, end - pos))));
      pos = end;
      while (size_t n = js_space_length(text, pos)) pos += n;
    }
    return Value::from_array(std::move(parts));
  }
  if (sep.string.empty()) fail("empty separator");
  std::vector<std::string> pieces;
  size_t start = 0;
  while (true) {
    const size_t at = self.find(sep.string, start);
    if (at == std::string::npos) break;
    pieces.push_back(self.substr(start, at - start));
    start = at + sep.string.size();
  }
  pieces.push_back(self.substr(start));
  if (maxsplit != -1 && static_cast<double>(pieces.size()) > maxsplit) {
    const size_t keep = maxsplit < 0 ? 0 : static_cast<size_t>(maxsplit);
    std::string rest;
    for (size_t i = keep; i < pieces.size(); ++i) rest += (i > keep ? sep.string : "") + pieces[i];
    pieces.resize(keep);
    pieces.push_back(rest);
  }
  for (std::string& piece : pieces) parts.push_back(Value::from_string(std::move(piece)));
  return Value::from_array(std::move(parts));
}

Value replace(const std::string& self, std::vector<Value>& args) {
  if (args.size() < 2) fail("replace() requires at least two arguments");
  if (!args[0].is(Kind::kString) || !args[1].is(Kind::kString)) fail("replace() arguments must be strings");
  Value count = Value::none();
  if (args.size() > 2) {
    if (args[2].is(Kind::kKwargs)) {
      const Value* named = args[2].object->find("count");
      count = named ? *named : Value::none();
    } else {
      count = args[2];
    }
  }
  if (!count.is(Kind::kInt) && !count.is(Kind::kNone)) fail("replace() count argument must be a number or null");
  if (count.is(Kind::kInt) && count.number == 0) return Value::from_string(self);
  double remaining = count.is(Kind::kNone) || count.number < 0 ? INFINITY : count.number;
  const std::string& from = args[0].string;
  const std::string& to = args[1].string;
  std::string out;
  if (from.empty()) {
    // An empty pattern matches at every code point boundary, the end included.
    for (const std::string& ch : code_points(self)) {
      if (remaining > 0) {
        out += to;
        --remaining;
      }
      out += ch;
    }
    if (remaining > 0) out += to;
    return Value::from_string(std::move(out));
  }
  size_t start = 0;
  while (remaining > 0) {
    const size_t at = self.find(from, start);
    if (at == std::string::npos) break;
    out.append(self, start, at - start);
    out += to;
    start = at + from.size();
    --remaining;
  }
  out.append(self, start, std::string::npos);
  return Value::from_string(std::move(out));
}

std::optional<Value> string_member(const std::string& s, const std::string& name) {
  if (name == "length") return Value::from_int(static_cast<double>(utf16_length(s)));
  if (name == "upper")
    return bind_string(
        s, [](const std::string& self, std::vector<Value>&) { return Value::from_string(upper_case(self)); });
  if (name == "lower")
    return bind_string(
        s, [](const std::string& self, std::vector<Value>&) { return Value::from_string(lower_case(self)); });
  if (name == "title")
    return bind_string(s,
                       [](const std::string& self, std::vector<Value>&) { return Value::from_string(js_title(self)); });
  if (name == "capitalize") {
    return bind_string(
        s, [](const std::string& self, std::vector<Value>&) { return Value::from_string(capitalized(self)); });
  }
  // The reference engine's strip family ignores a chars argument and strips whitespace.
  if (name == "strip") {
    return bind_string(
        s, [](const std::string& self, std::vector<Value>&) { return Value::from_string(std::string(js_trim(self))); });
  }
  if (name == "lstrip") {
    return bind_string(s, [](const std::string& self, std::vector<Value>&) {
      return Value::from_string(std::string(js_trim_start(self)));
    });
  }
  if (name == "rstrip") {
    return bind_string(s, [](const std::string& self, std::vector<Value>&) {
      return Value::from_string(std::string(js_trim_end(self)));
    });
  }
  if (name == "startswith") {
    return bind_string(s, [](const std::string& self, std::vector<Value>& args) {
      return affix_test(self, args, true, "startswith");
    });
  }
  if (name == "endswith") {
    return bind_string(
        s, [](const std::string& self, std::vector<Value>& args) { return affix_test(self, args, false, "endswith"); });
  }
  if (name == "split") return bind_string(s, split);
  if (name == "replace") return bind_string(s, replace);
  return std::nullopt;
}

std::optional<Value> object_member(const Value& object, const std::string& name) {
  const auto bind = [&object](std::function<Value(const Value&, std::vector<Value>&)> method) {
    return Value::from_function([object, method](std::vector<Value>& args, Scope&) { return method(object, args); });
  };
  if (name == "get") {
    return bind([](const Value& self, std::vector<Value>& args) {
      if (args.empty() || !args[0].is(Kind::kString)) {
        fail("Object key must be a string: got " + (args.empty() ? std::string("UndefinedValue") : type_name(args[0])));
      }
      if (const Value* found = self.object->find(args[0].string)) return *found;
      return args.size() > 1 ? args[1] : Value::none();
    });
  }
  if (name == "items") return bind([](const Value& self, std::vector<Value>&) { return object_items(self); });
  if (name == "keys") return bind([](const Value& self, std::vector<Value>&) { return object_keys(self); });
  if (name == "values") return bind([](const Value& self, std::vector<Value>&) { return object_values(self); });
  if (name == "dictsort")
    return bind([](const Value& self, std::vector<Value>& args) { return object_dictsort(self, args); });
  return std::nullopt;
}

Value range(std::vector<Value>& args) {
  for (const Value& arg : args) {
    if (!arg.is_number()) fail("range() arguments must be numbers");
  }
  if (args.empty()) fail("range() requires at least one argument");
  double start = 0;
  double stop = args[0].number;
  if (args.size() > 1) {
    start = args[0].number;
    stop = args[1].number;
  }
  const double step = args.size() > 2 ? args[2].number : 1;
  if (step == 0) fail("range() step must not be zero");
  if ((stop - start) / step > 100000) fail_unsupported("range() longer than 100000 is not supported");
  Array out;
  for (double i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.push_back(i == std::floor(i) ? Value::from_int(i) : Value::from_float(i));
  }
  return Value::from_array(std::move(out));
}

Value make_namespace(std::vector<Value>& args) {
  Object entries;
  std::vector<Value> positional = args;
  Value keywords;
  if (!positional.empty() && positional.back().is(Kind::kKwargs)) {
    keywords = positional.back();
    positional.pop_back();
  }
  if (positional.size() > 1) fail("namespace expected at most 1 argument, got " + std::to_string(positional.size()));
  if (positional.size() == 1) {
    const Value& source = positional[0];
    if (!source.is_mapping()) fail_unsupported("namespace() from a " + type_name(source) + " is not supported");
    for (const auto& [k, v] : source.object->entries()) entries.set(k, v);
  }
  if (keywords.is(Kind::kKwargs)) {
    for (const auto& [k, v] : keywords.object->entries()) entries.set(k, v);
  }
  return Value::from_object(std::move(entries), Kind::kNamespace);
}

}  // namespace

std::optional<Value> builtin_member(const Value& object, const std::string& name) {
  if (object.is(Kind::kString)) return string_member(object.string, name);
  if (object.is_array()) {
    if (name == "length") return Value::from_int(static_cast<double>(object.array->size()));
    return std::nullopt;
  }
  if (object.is_mapping()) return object_member(object, name);
  return std::nullopt;
}

Value object_items(const Value& object) {
  Array items;
  for (const auto& [k, v] : object.object->entries()) items.push_back(Value::from_array({Value::from_string(k), v}));
  return Value::from_array(std::move(items));
}

Value object_keys(const Value& object) {
  Array keys;
  for (const auto& entry : object.object->entries()) keys.push_back(Value::from_string(entry.first));
  return Value::from_array(std::move(keys));
}

Value object_values(const Value& object) {
  Array values;
  for (const auto& entry : object.object->entries()) values.push_back(entry.second);
  return Value::from_array(std::move(values));
}

Value object_dictsort(const Value& object, std::vector<Value>& args) {
  std::vector<Value> positional;
  Object keywords;
  for (const Value& arg : args) {
    if (arg.is(Kind::kKwargs)) {
      keywords = *arg.object;
    } else {
      positional.push_back(arg);
    }
  }
  const auto option = [&](size_t index, const char* key, Value fallback) {
    if (index < positional.size()) return positional[index];
    const Value* named = keywords.find(key);
    return named ? *named : fallback;
  };
  const Value case_sensitive = option(0, "case_sensitive", Value::from_bool(false));
  if (!case_sensitive.is(Kind::kBool)) fail("case_sensitive must be a boolean");
  const Value by = option(1, "by", Value::from_string("key"));
  if (!by.is(Kind::kString)) fail("by must be a string");
  if (by.string != "key" && by.string != "value") fail("by must be either 'key' or 'value'");
  const Value reverse = option(2, "reverse", Value::from_bool(false));
  if (!reverse.is(Kind::kBool)) fail("reverse must be a boolean");
  Array items = *object_items(object).array;
  const size_t index = by.string == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int c = compare_values((*a.array)[index], (*b.array)[index], case_sensitive.boolean);
    return reverse.boolean ? c > 0 : c < 0;
  });
  return Value::from_array(std::move(items));
}

std::string format_utc_time(const std::string& format, std::chrono::system_clock::time_point now) {
  static const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                  "July",    "August",   "September", "October", "November", "December"};
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&t, &utc);
  const auto pad2 = [](int n) { return (n < 10 ? "0" : "") + std::to_string(n); };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 == format.size()) {
      out.push_back(format[i]);
      continue;
    }
    const char d = format[++i];
    switch (d) {
      case 'Y':
        out += std::to_string(utc.tm_year + 1900);
        break;
      case 'm':
        out += pad2(utc.tm_mon + 1);
        break;
      case 'd':
        out += pad2(utc.tm_mday);
        break;
      case 'b':
        out += std::string(kMonths[utc.tm_mon]).substr(0, 3);
        break;
      case 'B':
        out += kMonths[utc.tm_mon];
        break;
      case 'H':
        out += pad2(utc.tm_hour);
        break;
      case 'M':
        out += pad2(utc.tm_min);
        break;
      case '%':
        out += '%';
        break;
      default:
        fail_unsupported(std::string("strftime_now directive %") + d + " is not supported");
    }
  }
  return out;
}

void declare_globals(Scope& globals, const RenderOptions& options) {
  globals.set("true", Value::from_bool(true));
  globals.set("false", Value::from_bool(false));
  globals.set("none", Value::none());
  globals.set("True", Value::from_bool(true));
  globals.set("False", Value::from_bool(false));
  globals.set("None", Value::none());
  globals.set("raise_exception", Value::from_function([](std::vector<Value>& args, Scope&) -> Value {
                if (args.empty()) fail("");
                fail(args[0].is(Kind::kString) ? args[0].string : to_output(args[0]));
              }));
  globals.set("range", Value::from_function([](std::vector<Value>& args, Scope&) { return range(args); }));
  globals.set("namespace", Value::from_function([](std::vector<Value>& args, Scope&) { return make_namespace(args); }));
  const auto now = options.now;
  globals.set("strftime_now", Value::from_function([now](std::vector<Value>& args, Scope&) {
                if (args.empty() || !args[0].is(Kind::kString)) fail("strftime_now() takes a format string");
                return Value::from_string(format_utc_time(args[0].string, now));
              }));
}

}  // namespace flashq::jinja
