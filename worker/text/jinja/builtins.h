// What a template can call without defining it: the methods of strings and objects
// (`s.startswith(...)`, `d.items()`, `s.length`) and the global functions (raise_exception,
// range, namespace, strftime_now) with the constants true/false/none.
#pragma once

#include <optional>
#include <string>

#include "worker/text/jinja/scope.h"
#include "worker/text/jinja/template.h"
#include "worker/text/jinja/value.h"

namespace flashq::jinja {

// The built-in member `name` of `object` (a bound method or a property such as a string's
// length); nullopt when the type has no such member.
std::optional<Value> builtin_member(const Value& object, const std::string& name);

// An object's (key, value) pairs as two-element arrays, its keys, its values.
Value object_items(const Value& object);
Value object_keys(const Value& object);
Value object_values(const Value& object);
// d.dictsort(case_sensitive=false, by='key', reverse=false), also reached as a filter.
Value object_dictsort(const Value& object, std::vector<Value>& args);

// Declares the globals in `globals`.
void declare_globals(Scope& globals, const RenderOptions& options);

// strftime_now's formatting of `now` in UTC: %Y %m %d %b %B %H %M %% as the reference engine
// supports them (English month names); any other directive is refused rather than misprinted.
std::string format_utc_time(const std::string& format, std::chrono::system_clock::time_point now);

}  // namespace flashq::jinja
