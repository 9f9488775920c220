// Image formats, as far as the simulator needs them. Layout facts are public
// (NVIDIA's fatbinary_section.h describes the wrapper and the header; open
// reimplementations of the driver document the entry header and the .nv.info
// attributes) and were checked against what nvcc 13.0 writes:
//
//   wrapper   u32 magic 0x466243b1, u32 version (1 or 2), pointer to a fatbin
//   fatbin    u32 magic 0xba55ed50, u16 version 1, u16 header size, u64 size of
//             the entries that follow the header
//   entry     u16 kind (1 PTX, 2 cubin), u16 version, u32 header size,
//             u64 payload size (padded), u32 compressed size at 16,
//             u32 architecture (10*major+minor) at 28, u64 flags at 40
//             (0x2000 LZ4, 0x8000 ZSTD, 0x100000 arch-specific "a", 0x200000
//             family "f"), u64 decompressed size at 56
//   cubin     ELF64, EM_CUDA (190). Kernels are STT_FUNC symbols marked as
//             entries (st_other 0x10) in `.text.<name>`; their parameters are
//             the KPARAM_INFO attributes (0x17) of `.nv.info.<name>`:
//             u16 ordinal at 4, u16 offset at 6, size in bits 18-31 of the u32
//             at 8. Variables are STT_OBJECT symbols in `.nv.global*` and
//             `.nv.constant<bank>` sections, initial bytes from the section;
//             a __managed__ one has st_other 0x04.
#include "image.h"

#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

namespace fakecuda {
namespace {

constexpr uint32_t kWrapperMagic = 0x466243b1;
constexpr uint32_t kFatbinMagic = 0xba55ed50;
constexpr uint16_t kEntryPtx = 1;
constexpr uint16_t kEntryCubin = 2;
constexpr uint64_t kEntryLz4 = 0x2000;
constexpr uint64_t kEntryZstd = 0x8000;
constexpr uint64_t kEntryArchSpecific = 0x100000;  // sm_90a and the like: that device only
constexpr uint16_t kMachineCuda = 190;
constexpr uint8_t kEntryFunction = 0x10;    // st_other of a kernel's symbol
constexpr uint8_t kManagedVariable = 0x04;  // st_other of a __managed__ variable (nvcc 13.0)
constexpr uint8_t kKparamInfo = 0x17;
constexpr uint64_t kMaxDecompressed = 1ull << 30;  // above this a header is taken as corrupt
constexpr size_t kUnbounded = SIZE_MAX / 2;

// Bounds-checked little-endian reads from a byte range.
struct Bytes {
  const unsigned char* data;
  size_t size;

  bool has(uint64_t offset, uint64_t length) const {
    return offset <= size && length <= size - offset;
  }
  template <typename T>
  std::optional<T> read(uint64_t offset) const {
    if (!has(offset, sizeof(T))) return std::nullopt;
    T value;
    std::memcpy(&value, data + offset, sizeof(T));
    return value;
  }
};

// ---- PTX --------------------------------------------------------------------

uint32_t ptx_type_bytes(const std::string& type) {
  static const struct {
    const char* name;
    uint32_t bytes;
  } kTypes[] = {{".u64", 8}, {".s64", 8},  {".b64", 8},   {".f64", 8},    {".u32", 4},
                {".s32", 4}, {".b32", 4},  {".f32", 4},   {".u16", 2},    {".s16", 2},
                {".b16", 2}, {".f16", 2},  {".bf16", 2},  {".u8", 1},     {".s8", 1},
                {".b8", 1},  {".pred", 1}, {".f16x2", 4}, {".bf16x2", 4}, {".b128", 16}};
  for (const auto& t : kTypes)
    if (type == t.name) return t.bytes;
  return 0;
}

// Text with comments blanked out, so that no later step sees them.
std::string strip_comments(const char* text, size_t size) {
  std::string out(text, size);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '"') {
      size_t end = out.find('"', i + 1);
      i = end == std::string::npos ? out.size() : end;
    } else if (out.compare(i, 2, "//") == 0) {
      size_t end = out.find('\n', i);
      if (end == std::string::npos) end = out.size();
      std::fill(out.begin() + static_cast<long>(i), out.begin() + static_cast<long>(end), ' ');
      i = end;
    } else if (out.compare(i, 2, "/*") == 0) {
      size_t end = out.find("*/", i + 2);
      end = end == std::string::npos ? out.size() : end + 2;
      std::fill(out.begin() + static_cast<long>(i), out.begin() + static_cast<long>(end), ' ');
      i = end - 1;
    }
  }
  return out;
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

// A PTX identifier (PTX ISA, "Identifiers"): a letter and then letters,
// digits, '_' or '$'; or '_', '$' or '%' and then at least one of those.
// The JIT compiler refuses any other name, and so does the simulator.
bool is_ptx_identifier(const std::string& name) {
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  const auto follows = [&](char c) {
    return letter(c) || (c >= '0' && c <= '9') || c == '_' || c == '$';
  };
  if (name.empty() || !std::all_of(name.begin() + 1, name.end(), follows)) return false;
  return letter(name[0]) ||
         ((name[0] == '_' || name[0] == '$' || name[0] == '%') && name.size() > 1);
}

// "name[2][3]" -> name and element count (0 for "name[]"); false if malformed.
bool split_dims(const std::string& declarator, std::string* name, uint64_t* count, bool* unsized) {
  size_t open = declarator.find('[');
  *name = declarator.substr(0, open);
  *count = 1;
  *unsized = false;
  while (open != std::string::npos) {
    size_t close = declarator.find(']', open);
    if (close == std::string::npos) return false;
    const std::string dim = declarator.substr(open + 1, close - open - 1);
    if (dim.empty()) {
      *unsized = true;
    } else {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(dim.c_str(), &end, 0);
      if (*end || n == 0 || n > (1ull << 32)) return false;
      *count *= n;
    }
    open = declarator.find('[', close);
  }
  return is_ptx_identifier(*name) && *count <= (1ull << 32);
}

// One `.param` of an entry: its size and alignment.
bool parse_param(const std::string& decl, uint32_t* size, uint32_t* align) {
  std::vector<std::string> w = words(decl);
  if (w.empty() || w[0] != ".param") return false;
  uint32_t element = 0, alignment = 0, vector = 1;
  for (size_t i = 1; i + 1 < w.size(); ++i) {
    if (w[i] == ".align") {
      alignment = static_cast<uint32_t>(std::strtoul(w[++i].c_str(), nullptr, 10));
    } else if (w[i] == ".v2" || w[i] == ".v4") {
      vector = w[i] == ".v2" ? 2 : 4;
    } else if (uint32_t bytes = ptx_type_bytes(w[i])) {
      element = bytes;
    }
  }
  if (!element || w.size() < 3) return false;
  std::string name;
  uint64_t count = 0;
  bool unsized = false;
  if (!split_dims(w.back(), &name, &count, &unsized) || unsized) return false;
  const uint64_t bytes = uint64_t{element} * vector * count;
  if (bytes > 32764) return false;  // the parameter space's limit
  *size = static_cast<uint32_t>(bytes);
  *align = alignment ? alignment : element * vector;
  return (*align & (*align - 1)) == 0;
}

bool parse_entry(const std::string& header, KernelImage* kernel) {
  size_t at = header.find(".entry");
  size_t name_start = header.find_first_not_of(" \t\r\n", at + 6);
  if (name_start == std::string::npos) return false;
  size_t name_end = header.find_first_of(" \t\r\n(", name_start);
  if (name_end == std::string::npos) name_end = header.size();
  kernel->name = header.substr(name_start, name_end - name_start);
  if (!is_ptx_identifier(kernel->name)) return false;
  size_t open = header.find_first_not_of(" \t\r\n", name_end);
  if (open == std::string::npos || header[open] != '(') return true;  // no parameters
  size_t close = header.find(')', open);
  if (close == std::string::npos) return false;
  const std::string list = header.substr(open + 1, close - open - 1);
  if (list.find_first_not_of(" \t\r\n") == std::string::npos) return true;
  std::istringstream params(list);
  uint32_t offset = 0;
  for (std::string decl; std::getline(params, decl, ',');) {
    uint32_t size = 0, align = 1;
    if (!parse_param(decl, &size, &align)) return false;
    offset = (offset + align - 1) / align * align;
    kernel->param_offsets.push_back(offset);
    kernel->param_sizes.push_back(size);
    offset += size;
  }
  return offset <= 32764;
}

// Appends one initialiser value as `bytes` little-endian bytes. Addresses
// (generic(x), a symbol) are left zero: no code reads them.
void append_value(const std::string& token, uint32_t bytes, bool is_float,
                  std::vector<unsigned char>* out) {
  uint64_t raw = 0;
  const char* s = token.c_str();
  char* end = nullptr;
  if ((token.rfind("0f", 0) == 0 || token.rfind("0F", 0) == 0) && token.size() == 10) {
    raw = std::strtoull(s + 2, &end, 16);
    if (bytes == 8) {  // a float literal for a double
      float f;
      const uint32_t bits = static_cast<uint32_t>(raw);
      std::memcpy(&f, &bits, 4);
      const double v = f;
      std::memcpy(&raw, &v, 8);
    }
  } else if ((token.rfind("0d", 0) == 0 || token.rfind("0D", 0) == 0) && token.size() == 18) {
    raw = std::strtoull(s + 2, &end, 16);
  } else if (is_float && token.find_first_of(".eE") != std::string::npos) {
    const double v = std::strtod(s, &end);
    if (bytes == 4) {
      const float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      raw = bits;
    } else {
      std::memcpy(&raw, &v, 8);
    }
  } else if (!token.empty() &&
             (token[0] == '-' || std::isdigit(static_cast<unsigned char>(token[0])))) {
    raw = token[0] == '-' ? static_cast<uint64_t>(std::strtoll(s, &end, 0))
                          : std::strtoull(s, &end, 0);
    if (is_float) {
      const double v = static_cast<double>(static_cast<int64_t>(raw));
      if (bytes == 4) {
        const float f = static_cast<float>(v);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        raw = bits;
      } else {
        std::memcpy(&raw, &v, 8);
      }
    }
  }
  for (uint32_t i = 0; i < bytes; ++i)
    out->push_back(i < 8 ? static_cast<unsigned char>(raw >> (8 * i)) : 0);
}

// A module-scope `.global` or `.const` declaration (without its ';').
// Returns false on a malformed one; sets *is_variable when it defines storage.
bool parse_variable(const std::string& decl, GlobalImage* var, bool* is_variable) {
  *is_variable = false;
  const size_t eq = decl.find('=');
  std::vector<std::string> w = words(decl.substr(0, eq));
  bool space = false, is_extern = false;
  uint32_t element = 0, vector = 1;
  bool is_float = false;
  for (const std::string& word : w) {
    if (word == ".global" || word == ".const") space = true;
    if (word == ".extern") is_extern = true;
    if (word.find(".managed") != std::string::npos) var->managed = true;
    if (word == ".v2" || word == ".v4") vector = word == ".v2" ? 2 : 4;
    if (uint32_t bytes = ptx_type_bytes(word)) {
      element = bytes;
      is_float = word[1] == 'f' || (word[1] == 'b' && word[2] == 'f');
    }
  }
  if (!space || is_extern) return true;
  // .texref, .samplerref, .surfref and the like hold no bytes the host reads.
  if (!element) return true;
  if (w.size() < 2) return false;
  uint64_t count = 0;
  bool unsized = false;
  if (!split_dims(w.back(), &var->name, &count, &unsized)) return false;
  const uint32_t value_bytes = element * vector;
  if (eq != std::string::npos) {
    std::string values = decl.substr(eq + 1);
    std::replace_if(
        values.begin(), values.end(), [](char c) { return c == '{' || c == '}' || c == ','; }, ' ');
    for (const std::string& token : words(values))
      append_value(token, element, is_float, &var->init);
  }
  if (unsized) count = std::max<uint64_t>(1, var->init.size() / value_bytes);
  var->size = count * value_bytes;
  if (var->init.size() > var->size) var->init.resize(var->size);
  *is_variable = true;
  return true;
}

// Whether a device of capability `cc` can compile PTX for `.target sm_NN[a|f]`
// (no target: any): not above the device, and exactly it for an "a" target.
bool ptx_target_fits(const std::string& text, unsigned cc) {
  size_t at = text.find(".target");
  if (at == std::string::npos) return true;
  size_t sm = text.find("sm_", at);
  if (sm == std::string::npos || sm > text.find('\n', at)) return true;
  char* end = nullptr;
  const unsigned target = static_cast<unsigned>(std::strtoul(text.c_str() + sm + 3, &end, 10));
  return *end == 'a' ? target == cc : target <= cc;
}

CUresult read_ptx(const char* text, size_t size, unsigned cc, Image* out) {
  const std::string ptx = strip_comments(text, size);
  if (ptx.find(".version") == std::string::npos || ptx.find(".target") == std::string::npos)
    return CUDA_ERROR_INVALID_IMAGE;
  // A target newer than the device is what the JIT compiler refuses.
  if (!ptx_target_fits(ptx, cc)) return CUDA_ERROR_INVALID_PTX;
  Image image;
  image.code_bytes = size;
  std::string statement;
  bool initialiser = false;  // after '=': braces belong to the value, not to a body
  for (size_t i = 0; i < ptx.size(); ++i) {
    const char c = ptx[i];
    if (initialiser && c != ';') {
      statement += c;
    } else if (c == '{') {
      // A body: an entry's or a device function's. Skip it whole.
      if (statement.find(".entry") != std::string::npos) {
        KernelImage kernel;
        if (!parse_entry(statement, &kernel)) return CUDA_ERROR_INVALID_PTX;
        image.kernels.push_back(std::move(kernel));
      }
      int depth = 1;
      while (depth > 0 && ++i < ptx.size()) {
        if (ptx[i] == '{') ++depth;
        if (ptx[i] == '}') --depth;
      }
      if (depth > 0) return CUDA_ERROR_INVALID_PTX;
      statement.clear();
    } else if (c == ';') {
      if (statement.find(".global") != std::string::npos ||
          statement.find(".const") != std::string::npos) {
        GlobalImage var;
        bool is_variable = false;
        if (!parse_variable(statement, &var, &is_variable)) return CUDA_ERROR_INVALID_PTX;
        if (is_variable) image.globals.push_back(std::move(var));
      }
      statement.clear();
      initialiser = false;
    } else if (c == '}') {
      return CUDA_ERROR_INVALID_PTX;  // unbalanced
    } else {
      initialiser = initialiser || c == '=';
      statement += c;
    }
  }
  *out = std::move(image);
  return CUDA_SUCCESS;
}

// ---- cubin (ELF) --------------------------------------------------------------

struct Section {
  std::string name;
  uint32_t type;
  uint64_t offset;
  uint64_t size;
  uint32_t link;
};

constexpr uint32_t kShtSymtab = 2;
constexpr uint32_t kShtNobits = 8;

// How far an ELF's headers say it reaches (for images without a size).
std::optional<uint64_t> elf_extent(Bytes b) {
  auto shoff = b.read<uint64_t>(0x28);
  auto shentsize = b.read<uint16_t>(0x3a);
  auto shnum = b.read<uint16_t>(0x3c);
  if (!shoff || !shentsize || !shnum || *shentsize != 64) return std::nullopt;
  uint64_t extent = *shoff + uint64_t{*shnum} * 64;
  for (uint16_t i = 0; i < *shnum; ++i) {
    const uint64_t at = *shoff + uint64_t{i} * 64;
    auto type = b.read<uint32_t>(at + 4);
    auto offset = b.read<uint64_t>(at + 0x18);
    auto size = b.read<uint64_t>(at + 0x20);
    if (!type || !offset || !size) return std::nullopt;
    if (*type != kShtNobits && *offset + *size > extent) extent = *offset + *size;
  }
  return extent;
}

// The architecture a cubin was built for, from e_flags.
unsigned cubin_arch(Bytes b) {
  const unsigned abi = b.data[8];
  const uint32_t flags = b.read<uint32_t>(0x30).value_or(0);
  return abi >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
}

CUresult read_cubin(Bytes b, Image* out) {
  auto bad = CUDA_ERROR_INVALID_IMAGE;
  if (!b.has(0, 64) ||
      std::memcmp(b.data,
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      b.data[4] != 2 || b.data[5] != 1)
    return bad;
  if (b.read<uint16_t>(0x12) != kMachineCuda) return bad;
  const uint64_t shoff = *b.read<uint64_t>(0x28);
  const uint16_t shentsize = *b.read<uint16_t>(0x3a);
  const uint16_t shnum = *b.read<uint16_t>(0x3c);
  const uint16_t shstrndx = *b.read<uint16_t>(0x3e);
  if (shentsize != 64 || shnum == 0 || shstrndx >= shnum || !b.has(shoff, uint64_t{shnum} * 64))
    return bad;
  std::vector<Section> sections(shnum);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint64_t at = shoff + uint64_t{i} * 64;
    Section& s = sections[i];
    s.type = *b.read<uint32_t>(at + 4);
    s.offset = *b.read<uint64_t>(at + 0x18);
    s.size = *b.read<uint64_t>(at + 0x20);
    s.link = *b.read<uint32_t>(at + 0x28);
    if (s.type != kShtNobits && !b.has(s.offset, s.size)) return bad;
  }
  auto string_at = [&](const Section& table, uint64_t index, std::string* text) {
    if (table.type == kShtNobits || index >= table.size) return false;
    const char* start = reinterpret_cast<const char*>(b.data + table.offset + index);
    const void* nul = std::memchr(start, 0, table.size - index);
    if (!nul) return false;
    text->assign(start, static_cast<const char*>(nul));
    return true;
  };
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint32_t name = *b.read<uint32_t>(shoff + uint64_t{i} * 64);
    if (!string_at(sections[shstrndx], name, &sections[i].name)) return bad;
  }
  auto section_named = [&](const std::string& name) -> const Section* {
    for (const Section& s : sections)
      if (s.name == name) return &s;
    return nullptr;
  };

  Image image;
  image.code_bytes = b.size;
  for (const Section& symtab : sections) {
    if (symtab.type != kShtSymtab) continue;
    if (symtab.link >= shnum || symtab.size % 24) return bad;
    const Section& strtab = sections[symtab.link];
    for (uint64_t at = symtab.offset; at < symtab.offset + symtab.size; at += 24) {
      const uint32_t name_index = *b.read<uint32_t>(at);
      const uint8_t info = b.data[at + 4];
      const uint8_t other = b.data[at + 5];
      const uint16_t shndx = *b.read<uint16_t>(at + 6);
      const uint64_t value = *b.read<uint64_t>(at + 8);
      const uint64_t size = *b.read<uint64_t>(at + 16);
      const unsigned type = info & 0xf;
      if ((type != 1 && type != 2) || shndx == 0 || shndx >= shnum) continue;
      std::string name;
      if (!string_at(strtab, name_index, &name)) return bad;
      const Section& home = sections[shndx];
      if (type == 2 && (other & kEntryFunction)) {
        KernelImage kernel;
        kernel.name = name;
        if (const Section* info_section = section_named(".nv.info." + name)) {
          if (info_section->type == kShtNobits) return bad;
          const Bytes attrs{b.data + info_section->offset, info_section->size};
          for (uint64_t a = 0; a < attrs.size;) {
            const uint8_t format = attrs.data[a];
            auto attr = attrs.read<uint8_t>(a + 1);
            auto word = attrs.read<uint16_t>(a + 2);
            if (!attr || !word || format < 1 || format > 4) return bad;
            const uint64_t length = format == 4 ? *word : 0;
            if (!attrs.has(a + 4, length)) return bad;
            if (*attr == kKparamInfo && format == 4) {
              if (length < 12) return bad;
              const uint16_t ordinal = *attrs.read<uint16_t>(a + 8);
              const uint16_t offset = *attrs.read<uint16_t>(a + 10);
              const uint32_t bytes = (*attrs.read<uint32_t>(a + 12) >> 18) & 0x3fff;
              if (ordinal >= 4096) return bad;
              if (kernel.param_sizes.size() <= ordinal) {
                kernel.param_sizes.resize(ordinal + 1);
                kernel.param_offsets.resize(ordinal + 1);
              }
              kernel.param_sizes[ordinal] = bytes;
              kernel.param_offsets[ordinal] = offset;
            }
            a += 4 + length;
          }
        }
        image.kernels.push_back(std::move(kernel));
      } else if (type == 1 && (home.name.rfind(".nv.global", 0) == 0 ||
                               home.name.rfind(".nv.constant", 0) == 0)) {
        GlobalImage var;
        var.name = name;
        var.size = size;
        var.managed = (other & kManagedVariable) != 0;
        if (size > kMaxDecompressed) return bad;
        if (home.type != kShtNobits) {
          if (value > home.size || size > home.size - value) return bad;
          var.init.assign(b.data + home.offset + value, b.data + home.offset + value + size);
        }
        image.globals.push_back(std::move(var));
      }
    }
  }
  // Symbol order is the linker's; keep the order of definition stable.
  *out = std::move(image);
  return CUDA_SUCCESS;
}

// ---- fatbin -----------------------------------------------------------------

struct Entry {
  uint16_t kind;
  unsigned arch;
  uint64_t flags;
  Bytes payload;          // as stored
  uint64_t compressed;    // bytes of compressed data in the payload (0: not compressed)
  uint64_t decompressed;  // size after decompression
};

CUresult decompress(const Entry& e, std::vector<unsigned char>* out) {
  if (e.decompressed == 0 || e.decompressed > kMaxDecompressed || e.compressed > e.payload.size)
    return CUDA_ERROR_INVALID_IMAGE;
  if (e.flags & kEntryZstd) {
    // A frame that states its size and disagrees with the header is corrupt.
    const unsigned long long stated = ZSTD_getFrameContentSize(e.payload.data, e.compressed);
    if (stated != e.decompressed && stated != ZSTD_CONTENTSIZE_UNKNOWN)
      return CUDA_ERROR_INVALID_IMAGE;
    out->resize(e.decompressed);
    const size_t n = ZSTD_decompress(out->data(), out->size(), e.payload.data, e.compressed);
    if (ZSTD_isError(n) || n != e.decompressed) return CUDA_ERROR_INVALID_IMAGE;
    return CUDA_SUCCESS;
  }
  // LZ4 expands at most 255 times.
  if (e.compressed > INT32_MAX || e.decompressed > e.compressed * 255 + 16)
    return CUDA_ERROR_INVALID_IMAGE;
  out->resize(e.decompressed);
  const int n = LZ4_decompress_safe(
      reinterpret_cast<const char*>(e.payload.data), reinterpret_cast<char*>(out->data()),
      static_cast<int>(e.compressed), static_cast<int>(e.decompressed));
  if (n <= 0) return CUDA_ERROR_INVALID_IMAGE;
  out->resize(static_cast<size_t>(n));
  return CUDA_SUCCESS;
}

CUresult read_entry(Bytes payload, uint16_t kind, unsigned cc, Image* out) {
  if (kind == kEntryCubin) return read_cubin(payload, out);
  const void* nul = std::memchr(payload.data, 0, payload.size);
  const size_t length =
      nul ? static_cast<size_t>(static_cast<const unsigned char*>(nul) - payload.data)
          : payload.size;
  return read_ptx(reinterpret_cast<const char*>(payload.data), length, cc, out);
}

CUresult read_fatbin(Bytes b, unsigned cc_major, unsigned cc_minor, Image* out) {
  auto header_size = b.read<uint16_t>(6);
  auto entries_size = b.read<uint64_t>(8);
  if (b.read<uint16_t>(4) != 1 || !header_size || *header_size < 16 || !entries_size ||
      !b.has(*header_size, *entries_size))
    return CUDA_ERROR_INVALID_IMAGE;
  const Bytes entries{b.data + *header_size, *entries_size};
  std::vector<Entry> found;
  for (uint64_t at = 0; at < entries.size;) {
    auto kind = entries.read<uint16_t>(at);
    auto entry_header = entries.read<uint32_t>(at + 4);
    auto payload_size = entries.read<uint64_t>(at + 8);
    if (!kind || !entry_header || *entry_header < 64 || !payload_size ||
        !entries.has(at, *entry_header) || !entries.has(at + *entry_header, *payload_size))
      return CUDA_ERROR_INVALID_IMAGE;
    Entry e;
    e.kind = *kind;
    e.compressed = *entries.read<uint32_t>(at + 16);
    e.arch = *entries.read<uint32_t>(at + 28);
    e.flags = *entries.read<uint64_t>(at + 40);
    e.decompressed = *entries.read<uint64_t>(at + 56);
    e.payload = Bytes{entries.data + at + *entry_header, *payload_size};
    if (!(e.flags & (kEntryZstd | kEntryLz4))) e.compressed = 0;
    if (e.kind == kEntryPtx || e.kind == kEntryCubin) found.push_back(e);
    at += *entry_header + *payload_size;
  }
  // The driver's choice: a cubin the device runs, else PTX it can compile.
  const unsigned cc = cc_major * 10 + cc_minor;
  const Entry* chosen = nullptr;
  for (const Entry& e : found) {
    const bool runs = (e.flags & kEntryArchSpecific)
                          ? e.arch == cc
                          : e.arch / 10 == cc_major && e.arch % 10 <= cc_minor;
    if (e.kind == kEntryCubin && runs && (!chosen || e.arch > chosen->arch)) chosen = &e;
  }
  if (!chosen)
    for (const Entry& e : found)
      if (e.kind == kEntryPtx && e.arch <= cc && (!chosen || e.arch > chosen->arch)) chosen = &e;
  if (!chosen) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  if (!chosen->compressed) return read_entry(chosen->payload, chosen->kind, cc, out);
  std::vector<unsigned char> plain;
  if (CUresult r = decompress(*chosen, &plain); r != CUDA_SUCCESS) return r;
  return read_entry(Bytes{plain.data(), plain.size()}, chosen->kind, cc, out);
}

}  // namespace

ImageKind image_kind(ImageBytes bytes) {
  if (!bytes.data || (bytes.bounded && bytes.size < 4)) return ImageKind::kUnknown;
  uint32_t magic = 0;
  std::memcpy(&magic, bytes.data, 4);
  if (magic == kWrapperMagic) return ImageKind::kFatbinWrapper;
  if (magic == kFatbinMagic) return ImageKind::kFatbin;
  if (std::memcmp(bytes.data,
                  "\x7f"
                  "ELF",
                  4) == 0)
    return ImageKind::kCubin;
  return ImageKind::kPtx;  // text, or nothing the driver reads
}

CUresult read_image(ImageBytes bytes, unsigned cc_major, unsigned cc_minor, Image* out) {
  const unsigned cc = cc_major * 10 + cc_minor;
  const size_t limit = bytes.bounded ? bytes.size : kUnbounded;
  switch (image_kind(bytes)) {
    case ImageKind::kUnknown:
      return CUDA_ERROR_INVALID_IMAGE;
    case ImageKind::kFatbinWrapper: {
      if (bytes.bounded) return CUDA_ERROR_INVALID_IMAGE;  // holds a pointer: only in memory
      uint32_t version = 0;
      const unsigned char* data = nullptr;
      std::memcpy(&version, bytes.data + 4, 4);
      std::memcpy(&data, bytes.data + 8, sizeof(data));
      if ((version != 1 && version != 2) || !data) return CUDA_ERROR_INVALID_IMAGE;
      uint32_t magic = 0;
      std::memcpy(&magic, data, 4);
      if (magic != kFatbinMagic) return CUDA_ERROR_INVALID_IMAGE;
      return read_image(ImageBytes{data, 0, false}, cc_major, cc_minor, out);
    }
    case ImageKind::kFatbin: {
      Bytes b{bytes.data, limit};
      if (!bytes.bounded) {
        // The header says how far the image reaches.
        uint16_t header_size = 0;
        uint64_t entries_size = 0;
        std::memcpy(&header_size, bytes.data + 6, 2);
        std::memcpy(&entries_size, bytes.data + 8, 8);
        if (header_size < 16 || entries_size > kUnbounded) return CUDA_ERROR_INVALID_IMAGE;
        b.size = header_size + entries_size;
      }
      return read_fatbin(b, cc_major, cc_minor, out);
    }
    case ImageKind::kCubin: {
      Bytes b{bytes.data, limit};
      if (!bytes.bounded) {
        b.size = 64;
        std::optional<uint64_t> shoff = b.read<uint64_t>(0x28);
        uint16_t shnum = b.read<uint16_t>(0x3c).value_or(0);
        if (!shoff || *shoff > kUnbounded || shnum == 0) return CUDA_ERROR_INVALID_IMAGE;
        b.size = *shoff + uint64_t{shnum} * 64;
        std::optional<uint64_t> extent = elf_extent(b);
        if (!extent || *extent > kUnbounded) return CUDA_ERROR_INVALID_IMAGE;
        b.size = *extent;
      }
      if (!b.has(0, 64)) return CUDA_ERROR_INVALID_IMAGE;
      const unsigned arch = cubin_arch(b);
      if (b.read<uint16_t>(0x12) == kMachineCuda && (arch / 10 != cc_major || arch % 10 > cc_minor))
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
      return read_cubin(b, out);
    }
    case ImageKind::kPtx: {
      const char* text = reinterpret_cast<const char*>(bytes.data);
      const size_t length = bytes.bounded ? strnlen(text, bytes.size) : std::strlen(text);
      return read_ptx(text, length, cc, out);
    }
  }
  return CUDA_ERROR_INVALID_IMAGE;
}

bool is_timed_kernel(const KernelImage& kernel) {
  return kernel.name.rfind("spin", 0) == 0 && !kernel.param_sizes.empty() &&
         kernel.param_sizes[0] == 8;
}

std::string interface_ptx(const Image& image, unsigned cc_major, unsigned cc_minor) {
  std::ostringstream ptx;
  ptx << "// Linked by the simulated driver: interfaces only, no code.\n"
      << ".version 8.0\n.target sm_" << cc_major * 10 + cc_minor << "\n.address_size 64\n\n";
  for (const GlobalImage& var : image.globals) {
    ptx << ".visible .global " << (var.managed ? ".attribute(.managed) " : "") << ".align 8 .b8 "
        << var.name << "[" << std::max<uint64_t>(var.size, 1) << "]";
    if (!var.init.empty()) {
      ptx << " = {";
      for (size_t i = 0; i < var.init.size(); ++i)
        ptx << (i ? ", " : "") << static_cast<unsigned>(var.init[i]);
      ptx << "}";
    }
    ptx << ";\n";
  }
  for (const KernelImage& kernel : image.kernels) {
    ptx << ".visible .entry " << kernel.name << "(";
    uint32_t offset = 0;
    for (size_t i = 0; i < kernel.param_sizes.size(); ++i) {
      // The alignment that puts the parameter where the original had it.
      const uint32_t want = kernel.param_offsets[i];
      uint32_t align = 1;
      // Up to the parameter space's size: a `.align 32` parameter (a struct
      // of __align__(32)) must stay at its offset too.
      for (uint32_t a = 32768; a > 1; a /= 2) {
        if (want % a == 0 && (offset + a - 1) / a * a == want) {
          align = a;
          break;
        }
      }
      offset = (offset + align - 1) / align * align + kernel.param_sizes[i];
      ptx << (i ? ",\n  " : "\n  ") << ".param .align " << align << " .b8 " << kernel.name
          << "_param_" << i << "[" << std::max<uint32_t>(kernel.param_sizes[i], 1) << "]";
    }
    ptx << ")\n{\n  ret;\n}\n";
  }
  return ptx.str();
}

}  // namespace fakecuda
