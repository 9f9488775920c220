// cuGetErrorName and cuGetErrorString, for every code the toolkit's cuda.h
// defines (the list is generated from it at build time). They answer before
// cuInit, like the real driver.
#include <cctype>
#include <cstring>
#include <string>
#include <unordered_map>

#include "driver.h"

namespace {

struct ErrorText {
  const char* name;
  std::string description;
};

// "CUDA_ERROR_OUT_OF_MEMORY" -> "out of memory"
std::string describe(const char* name) {
  if (std::strcmp(name, "CUDA_SUCCESS") == 0) return "no error";
  std::string text = name + std::strlen("CUDA_ERROR_");
  for (char& c : text)
    c = c == '_' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

const ErrorText* lookup(CUresult code) {
  static const auto* table = [] {
    auto* t = new std::unordered_map<int, ErrorText>();
#define FAKECUDA_ERROR(name) t->emplace(static_cast<int>(name), ErrorText{#name, describe(#name)});
#include "error_names.inc"
#undef FAKECUDA_ERROR
    return t;
  }();
  auto it = table->find(static_cast<int>(code));
  return it == table->end() ? nullptr : &it->second;
}

}  // namespace

FAKECUDA_EXPORT CUresult cuGetErrorName(CUresult error, const char** pStr) {
  FAKECUDA_REQUIRE(pStr, CUDA_ERROR_INVALID_VALUE);
  const ErrorText* text = lookup(error);
  *pStr = text ? text->name : nullptr;
  return text ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKECUDA_EXPORT CUresult cuGetErrorString(CUresult error, const char** pStr) {
  FAKECUDA_REQUIRE(pStr, CUDA_ERROR_INVALID_VALUE);
  const ErrorText* text = lookup(error);
  *pStr = text ? text->description.c_str() : nullptr;
  return text ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
