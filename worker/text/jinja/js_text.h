// Text and number semantics of the JavaScript engine that chat templates are checked against
// (@huggingface/jinja), over UTF-8 strings: what counts as whitespace, string length and indexing
// in UTF-16 code units, slicing by code point, Number-to-string formatting, JSON.stringify's
// string quoting, parseInt/parseFloat. Kept apart so that the evaluator reads as Jinja semantics.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashq::jinja {

// Byte length of the JavaScript whitespace character (/\s/) at `pos`, 0 if there is none.
size_t js_space_length(std::string_view text, size_t pos);
// Byte length of the JavaScript whitespace character that ends text[0, end), 0 if none.
size_t js_space_length_before(std::string_view text, size_t end);

std::string_view js_trim_start(std::string_view text);
std::string_view js_trim_end(std::string_view text);
std::string_view js_trim(std::string_view text);

// Length in UTF-16 code units (String.prototype.length).
size_t utf16_length(std::string_view text);
// The UTF-16 code unit at `index` (negative counts from the end), as UTF-8; nullopt when out of
// range. A lone surrogate (half of a character outside the BMP) becomes U+FFFD.
std::optional<std::string> utf16_unit_at(std::string_view text, long long index);
// The code points of `text`, each as its UTF-8 bytes (Array.from(string)).
std::vector<std::string> code_points(std::string_view text);
// UTF-16 code unit order, as JavaScript's < on strings.
int compare_utf16(std::string_view a, std::string_view b);

// toUpperCase/toLowerCase where each character maps to one (utf8proc's simple case mapping);
// nullopt for text with a character JavaScript maps to several or by context ("ß", "İ", "Σ").
std::optional<std::string> js_upper_simple(std::string_view text);
std::optional<std::string> js_lower_simple(std::string_view text);
// Upper-cases the first word character after a non-word one (ASCII \b\w), leaving the rest.
std::string js_title(std::string_view text);
// Upper-cases the first UTF-16 unit only (nullopt as js_upper_simple).
std::optional<std::string> js_capitalize_simple(std::string_view text);

// Number.prototype.toString(): shortest round-trip digits, exponent form outside [1e-7, 1e21).
std::string js_number(double value);
// JSON.stringify of a string: quotes, \" \\ \b \f \n \r \t, other controls as \u00xx.
std::string json_quote(std::string_view text);
// Escapes every UTF-16 unit in [0x7f, 0xffff] as \uxxxx (tojson's ensure_ascii).
std::string json_ascii_escape(std::string_view json);

// parseInt(text, 10) and parseFloat(text); nullopt where JavaScript gives NaN.
std::optional<double> js_parse_int(std::string_view text);
std::optional<double> js_parse_float(std::string_view text);
// Number(text), as == applies it when comparing a string with a number; nullopt for NaN.
std::optional<double> js_to_number(std::string_view text);

// Appends the UTF-8 encoding of `code_point`.
void append_utf8(std::string& out, char32_t code_point);

}  // namespace flashq::jinja
