// Images as nvcc writes them (built with the tests: see images/ and
// CMakeLists.txt): fatbins plain and compressed, cubins and PTX load, name
// their kernels with their parameter layouts, and place their variables with
// their initial bytes. Bad images are refused cleanly and change nothing.
#include <lz4.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <vector>

#include "support.h"

namespace fakecuda::test {
namespace {

std::string image_path(const std::string& name) {
  return std::string(FAKECUDA_IMAGES) + "/" + name;
}

std::string read_image(const std::string& name) {
  std::ifstream in(image_path(name), std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The layout of the fatbin entry header (see src/image.cpp).
uint64_t entry_flags(const std::string& fatbin) {
  uint16_t header = 0;
  uint64_t flags = 0;
  std::memcpy(&header, fatbin.data() + 6, 2);
  std::memcpy(&flags, fatbin.data() + header + 40, 8);
  return flags;
}

// What cudart hands the driver: __fatBinC_Wrapper_t.
struct FatbinWrapper {
  uint32_t magic;
  uint32_t version;
  const void* data;
  const void* filename_or_fatbins;
};

const char* const kScale = "_Z5scalePffi4Pairc";

class Images : public ::testing::Test {
 protected:
  void SetUp() override {
    init_primary(0);
    baseline_ = free_memory();
  }
  size_t taken() { return baseline_ - free_memory(); }

  // Everything kernels.cu declares, as the driver must report it.
  void expect_kernels_cu(CUmodule module) {
    unsigned count = 0;
    ASSERT_CU(cuModuleGetFunctionCount(&count, module));
    EXPECT_EQ(count, 4u);
    for (const char* name : {"spin_image", kScale, "_Z4fillIdEvPT_S0_", "_Z4fillIiEvPT_S0_"}) {
      CUfunction f = nullptr;
      EXPECT_CU(cuModuleGetFunction(&f, module, name)) << name;
    }
    CUfunction scale = nullptr;
    ASSERT_CU(cuModuleGetFunction(&scale, module, kScale));
    // scale(float*, float, int, Pair, char): Pair is 24 bytes aligned to 8.
    const size_t offsets[] = {0, 8, 12, 16, 40}, sizes[] = {8, 4, 4, 24, 1};
    for (size_t i = 0; i < 5; ++i) {
      size_t offset = 99, size = 99;
      ASSERT_CU(cuFuncGetParamInfo(scale, i, &offset, &size));
      EXPECT_EQ(offset, offsets[i]) << "parameter " << i;
      EXPECT_EQ(size, sizes[i]) << "parameter " << i;
    }
    size_t offset = 0;
    EXPECT_EQ(cuFuncGetParamInfo(scale, 5, &offset, nullptr), CUDA_ERROR_INVALID_VALUE);
    CUfunction fill = nullptr;
    ASSERT_CU(cuModuleGetFunction(&fill, module, "_Z4fillIdEvPT_S0_"));
    size_t size = 0;
    ASSERT_CU(cuFuncGetParamInfo(fill, 1, &offset, &size));
    EXPECT_EQ(offset, 8u);
    EXPECT_EQ(size, 8u);
    const char* name = nullptr;
    ASSERT_CU(cuFuncGetName(&name, scale));
    EXPECT_STREQ(name, kScale);
    CUmodule owner = nullptr;
    ASSERT_CU(cuFuncGetModule(&owner, scale));
    EXPECT_EQ(owner, module);

    // __device__ int table[28] = {1, ..., 10}: in device memory, initialised.
    CUdeviceptr table = 0;
    size_t bytes = 0;
    ASSERT_CU(cuModuleGetGlobal_v2(&table, &bytes, module, "table"));
    ASSERT_EQ(bytes, 112u);
    int values[28];
    std::memset(values, 0xff, sizeof(values));
    ASSERT_CU(cuMemcpyDtoH_v2(values, table, sizeof(values)));
    for (int i = 0; i < 28; ++i)
      EXPECT_EQ(values[i], i < 10 ? i + 1 : 0) << "table[" << i << "]";
    // __constant__ float scales[4] = {1.5f, 2.5f}
    CUdeviceptr scales = 0;
    ASSERT_CU(cuModuleGetGlobal_v2(&scales, &bytes, module, "scales"));
    ASSERT_EQ(bytes, 16u);
    float floats[4];
    ASSERT_CU(cuMemcpyDtoH_v2(floats, scales, sizeof(floats)));
    EXPECT_EQ(floats[0], 1.5f);
    EXPECT_EQ(floats[1], 2.5f);
    EXPECT_EQ(floats[2], 0.0f);
    CUdeviceptr counter = 0;
    ASSERT_CU(cuModuleGetGlobal_v2(&counter, nullptr, module, "counter"));
    int seven = 0;
    ASSERT_CU(cuMemcpyDtoH_v2(&seven, counter, sizeof(seven)));
    EXPECT_EQ(seven, 7);
    EXPECT_EQ(cuModuleGetGlobal_v2(&table, &bytes, module, "missing"), CUDA_ERROR_NOT_FOUND);
    EXPECT_EQ(cuModuleGetGlobal_v2(&table, &bytes, module, nullptr), CUDA_ERROR_INVALID_VALUE);
    // A variable belongs to its module: cuMemFree refuses it.
    EXPECT_EQ(cuMemFree_v2(table), CUDA_ERROR_INVALID_VALUE);
  }

  void load_and_check(const std::string& image) {
    CUmodule module = nullptr;
    ASSERT_CU(cuModuleLoadData(&module, image.data()));
    EXPECT_GE(taken(), 2ull << 20) << "code and variables are charged";
    expect_kernels_cu(module);
    ASSERT_CU(cuModuleUnload(module));
    EXPECT_EQ(taken(), 0u);
  }

  size_t baseline_ = 0;
};

TEST_F(Images, PlainFatbin) {
  const std::string fatbin = read_image("kernels.fatbin");
  ASSERT_EQ(entry_flags(fatbin) & 0xa000, 0u) << "built without compression";
  load_and_check(fatbin);
}

TEST_F(Images, ZstdCompressedFatbin) {
  const std::string fatbin = read_image("kernels_zstd.fatbin");
  ASSERT_NE(entry_flags(fatbin) & 0x8000, 0u) << "nvcc 13 compresses with ZSTD";
  load_and_check(fatbin);
}

// Older toolkits compressed entries with LZ4: the same image, recompressed.
TEST_F(Images, Lz4CompressedFatbin) {
  const std::string plain = read_image("kernels.fatbin");
  uint16_t header = 0;
  uint32_t entry_header = 0;
  uint64_t payload = 0;
  std::memcpy(&header, plain.data() + 6, 2);
  std::memcpy(&entry_header, plain.data() + header + 4, 4);
  std::memcpy(&payload, plain.data() + header + 8, 8);
  std::vector<char> packed(LZ4_compressBound(static_cast<int>(payload)));
  const int packed_size =
      LZ4_compress_default(plain.data() + header + entry_header, packed.data(),
                           static_cast<int>(payload), static_cast<int>(packed.size()));
  ASSERT_GT(packed_size, 0);
  const uint64_t padded = (static_cast<uint64_t>(packed_size) + 7) / 8 * 8;
  std::string entry = plain.substr(header, entry_header);
  const uint32_t compressed = static_cast<uint32_t>(packed_size);
  uint64_t flags = 0;
  std::memcpy(&flags, entry.data() + 40, 8);
  flags |= 0x2000;
  std::memcpy(entry.data() + 8, &padded, 8);
  std::memcpy(entry.data() + 16, &compressed, 4);
  std::memcpy(entry.data() + 40, &flags, 8);
  std::memcpy(entry.data() + 56, &payload, 8);
  std::string fatbin = plain.substr(0, header) + entry + std::string(packed.data(), packed_size) +
                       std::string(padded - packed_size, '\0');
  const uint64_t entries = fatbin.size() - header;
  std::memcpy(fatbin.data() + 8, &entries, 8);
  load_and_check(fatbin);
}

TEST_F(Images, Cubin) {
  load_and_check(read_image("kernels.cubin"));
}

TEST_F(Images, Ptx) {
  load_and_check(read_image("kernels.ptx"));
}

TEST_F(Images, FromFilesAndThroughTheWrapper) {
  CUmodule module = nullptr;
  for (const char* name :
       {"kernels.fatbin", "kernels_zstd.fatbin", "kernels.cubin", "kernels.ptx"}) {
    ASSERT_CU(cuModuleLoad(&module, image_path(name).c_str())) << name;
    expect_kernels_cu(module);
    ASSERT_CU(cuModuleUnload(module));
  }
  EXPECT_EQ(cuModuleLoad(&module, image_path("absent.fatbin").c_str()), CUDA_ERROR_FILE_NOT_FOUND);
  const std::string fatbin = read_image("kernels_zstd.fatbin");
  const FatbinWrapper wrapper{0x466243b1, 1, fatbin.data(), nullptr};
  ASSERT_CU(cuModuleLoadFatBinary(&module, &wrapper));
  expect_kernels_cu(module);
  ASSERT_CU(cuModuleUnload(module));
  ASSERT_CU(cuModuleLoadData(&module, &wrapper));
  ASSERT_CU(cuModuleUnload(module));
  const FatbinWrapper bad_version{0x466243b1, 7, fatbin.data(), nullptr};
  EXPECT_EQ(cuModuleLoadData(&module, &bad_version), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(taken(), 0u);
}

TEST_F(Images, PtxOnlyFatbinIsCompiledForTheDevice) {
  const std::string fatbin = read_image("kernels_ptx80.fatbin");
  CUmodule module = nullptr;
  ASSERT_CU(cuModuleLoadData(&module, fatbin.data()));
  expect_kernels_cu(module);
  ASSERT_CU(cuModuleUnload(module));
}

TEST_F(Images, NoEntryForTheDevice) {
  const std::string fatbin = read_image("kernels_sm100.fatbin");
  CUmodule module = nullptr;
  EXPECT_EQ(cuModuleLoadData(&module, fatbin.data()), CUDA_ERROR_NO_BINARY_FOR_GPU);
  CUlibrary library = nullptr;
  EXPECT_EQ(cuLibraryLoadData(&library, fatbin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_ERROR_NO_BINARY_FOR_GPU);
  // PTX newer than the device is what the JIT compiler refuses.
  const char* ptx = ".version 8.0\n.target sm_100\n.address_size 64\n.visible .entry k()\n{\n}\n";
  EXPECT_EQ(cuModuleLoadData(&module, ptx), CUDA_ERROR_INVALID_PTX);
  EXPECT_EQ(taken(), 0u);
}

// The entry the driver picks, on devices of other capabilities (helper
// processes with their own simulated machine).
TEST(ImageChoice, FollowsTheDevicesCapability) {
  auto load_on = [](const char* cc, const char* image) {
    std::map<std::string, std::string> env{{"FAKECUDA_CC", cc},
                                           {"FAKECUDA_STATE", test_dir() + "/cc-" + cc}};
    std::string out = run_helper({"load", image_path(image)}, env);
    return out.substr(0, out.find('\n'));
  };
  EXPECT_EQ(load_on("9.0", "kernels_sm90a.fatbin"), "CUDA_SUCCESS");
  EXPECT_EQ(load_on("9.5", "kernels_sm90a.fatbin"), "CUDA_ERROR_NO_BINARY_FOR_GPU")
      << "an arch-specific cubin runs on its own architecture only";
  EXPECT_EQ(load_on("9.5", "kernels.fatbin"), "CUDA_SUCCESS") << "a newer minor runs sm_90";
  EXPECT_EQ(load_on("8.6", "kernels.fatbin"), "CUDA_ERROR_NO_BINARY_FOR_GPU");
  EXPECT_EQ(load_on("8.6", "kernels.cubin"), "CUDA_ERROR_NO_BINARY_FOR_GPU");
  EXPECT_EQ(load_on("8.6", "kernels_ptx80.fatbin"), "CUDA_SUCCESS") << "PTX for 8.0 compiles";
  EXPECT_EQ(load_on("7.5", "kernels_ptx80.fatbin"), "CUDA_ERROR_NO_BINARY_FOR_GPU");
  EXPECT_EQ(load_on("8.6", "kernels.ptx"), "CUDA_ERROR_INVALID_PTX") << ".target sm_90";
}

TEST_F(Images, ImageWithoutKernels) {
  const std::string fatbin = read_image("no_kernels.fatbin");
  CUmodule module = nullptr;
  ASSERT_CU(cuModuleLoadData(&module, fatbin.data()));
  unsigned count = 99;
  ASSERT_CU(cuModuleGetFunctionCount(&count, module));
  EXPECT_EQ(count, 0u);
  CUdeviceptr data = 0;
  size_t bytes = 0;
  ASSERT_CU(cuModuleGetGlobal_v2(&data, &bytes, module, "only_data"));
  float values[3] = {};
  ASSERT_CU(cuMemcpyDtoH_v2(values, data, sizeof(values)));
  EXPECT_EQ(values[2], 3.0f);
  ASSERT_CU(cuModuleUnload(module));
}

// Handwritten PTX: the forms cuBLAS's and PyTorch's PTX use.
TEST_F(Images, PtxVariablesAndEntries) {
  const char* ptx = R"ptx(
//
// .visible .entry commented_out(.param .u32 x) {}
//
.version 8.0
.target sm_90
.address_size 64
/* .global .u32 not_a_variable = 3; */
.global .align 4 .b8 _ZN6cublas8internal15deviceConstantsE[112] = {0, 0, 128, 63, 0, 0, 0, 64};
.global .u32 answer = 42;
.visible .global .align 8 .f64 halves[2] = {0.5, 0d3FF8000000000000};
.const .align 4 .f32 ones[3] = {0f3F800000, 1.0};
.global .align 8 .u64 table_of_pointers[2] = {generic(answer), 0};
.extern .global .align 4 .b8 elsewhere[];
.shared .align 4 .b8 scratch[64];
.global .texref some_texture;

.func (.param .b32 func_retval0) _Z6helperi(.param .b32 _Z6helperi_param_0)
{
  ret;
}

.visible .entry _ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_EEEEvT0_(
  .param .u32 n,
  .param .align 16 .b8 functor[32],
  .param .u8 flag,
  .param .align 8 .b8 data[24]
)
.maxntid 128, 1, 1
{
  .reg .b32 %r<4>;
  {
    .reg .b32 inner;
  }
  ret;
}
)ptx";
  CUmodule module = nullptr;
  ASSERT_CU(cuModuleLoadData(&module, ptx));
  unsigned count = 0;
  ASSERT_CU(cuModuleGetFunctionCount(&count, module));
  ASSERT_EQ(count, 1u) << "device functions and comments are not kernels";
  CUfunction f = nullptr;
  ASSERT_CU(cuModuleEnumerateFunctions(&f, 1, module));
  const char* name = nullptr;
  ASSERT_CU(cuFuncGetName(&name, f));
  EXPECT_STREQ(name, "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_EEEEvT0_");
  const size_t offsets[] = {0, 16, 48, 56}, sizes[] = {4, 32, 1, 24};
  for (size_t i = 0; i < 4; ++i) {
    size_t offset = 0, size = 0;
    ASSERT_CU(cuFuncGetParamInfo(f, i, &offset, &size));
    EXPECT_EQ(offset, offsets[i]) << i;
    EXPECT_EQ(size, sizes[i]) << i;
  }
  CUdeviceptr p = 0;
  size_t bytes = 0;
  ASSERT_CU(cuModuleGetGlobal_v2(&p, &bytes, module, "_ZN6cublas8internal15deviceConstantsE"));
  EXPECT_EQ(bytes, 112u);
  float constants[28];
  ASSERT_CU(cuMemcpyDtoH_v2(constants, p, sizeof(constants)));
  EXPECT_EQ(constants[0], 1.0f);
  EXPECT_EQ(constants[1], 2.0f);
  EXPECT_EQ(constants[27], 0.0f);
  uint32_t answer = 0;
  ASSERT_CU(cuModuleGetGlobal_v2(&p, &bytes, module, "answer"));
  ASSERT_CU(cuMemcpyDtoH_v2(&answer, p, 4));
  EXPECT_EQ(answer, 42u);
  double halves[2];
  ASSERT_CU(cuModuleGetGlobal_v2(&p, &bytes, module, "halves"));
  EXPECT_EQ(bytes, 16u);
  ASSERT_CU(cuMemcpyDtoH_v2(halves, p, sizeof(halves)));
  EXPECT_EQ(halves[0], 0.5);
  EXPECT_EQ(halves[1], 1.5);
  float ones[3];
  ASSERT_CU(cuModuleGetGlobal_v2(&p, &bytes, module, "ones"));
  ASSERT_CU(cuMemcpyDtoH_v2(ones, p, sizeof(ones)));
  EXPECT_EQ(ones[0], 1.0f);
  EXPECT_EQ(ones[1], 1.0f);
  EXPECT_EQ(ones[2], 0.0f);
  ASSERT_CU(cuModuleGetGlobal_v2(&p, &bytes, module, "table_of_pointers"));
  EXPECT_EQ(bytes, 16u);
  for (const char* absent : {"not_a_variable", "elsewhere", "scratch", "some_texture"})
    EXPECT_EQ(cuModuleGetGlobal_v2(&p, &bytes, module, absent), CUDA_ERROR_NOT_FOUND) << absent;
  ASSERT_CU(cuModuleUnload(module));
}

TEST_F(Images, JitOptionsAreCheckedAndAnswered) {
  const std::string ptx = read_image("kernels.ptx");
  char log[16] = "untouched";
  CUjit_option options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(sizeof(log))};
  CUmodule module = nullptr;
  ASSERT_CU(cuModuleLoadDataEx(&module, ptx.data(), 2, options, values));
  EXPECT_STREQ(log, "");
  EXPECT_EQ(values[1], nullptr) << "no bytes of log";
  ASSERT_CU(cuModuleUnload(module));
  EXPECT_EQ(cuModuleLoadDataEx(&module, ptx.data(), 1, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUjit_option unknown = CU_JIT_NUM_OPTIONS;
  EXPECT_EQ(cuModuleLoadDataEx(&module, ptx.data(), 1, &unknown, values), CUDA_ERROR_INVALID_VALUE);
}

// Truncated and corrupted images: never a crash, always a clean refusal (or,
// where the damage misses everything the driver reads, a load), and a refusal
// changes nothing.
TEST_F(Images, DamagedImagesAreRefusedCleanly) {
  const CUresult refusals[] = {CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_PTX,
                               CUDA_ERROR_NO_BINARY_FOR_GPU};
  auto acceptable = [&](CUresult r) {
    return r == CUDA_SUCCESS ||
           std::find(std::begin(refusals), std::end(refusals), r) != std::end(refusals);
  };
  CUlinkState link = nullptr;
  ASSERT_CU(cuLinkCreate_v2(0, nullptr, nullptr, &link));
  std::mt19937 random(12345);
  const std::string path = test_dir() + "/damaged.image";
  const std::pair<const char*, CUjitInputType> images[] = {
      {"kernels.fatbin", CU_JIT_INPUT_FATBINARY},
      {"kernels_zstd.fatbin", CU_JIT_INPUT_FATBINARY},
      {"kernels.cubin", CU_JIT_INPUT_CUBIN}};
  for (const auto& [name, type] : images) {
    const std::string image = read_image(name);
    // Truncated: through a file, whose size bounds what the driver may read.
    for (size_t length = 0; length < image.size(); length += 1 + length / 8) {
      std::ofstream(path, std::ios::binary | std::ios::trunc).write(image.data(), length);
      CUmodule module = nullptr;
      const CUresult r = cuModuleLoad(&module, path.c_str());
      EXPECT_TRUE(acceptable(r)) << name << " truncated to " << length << ": " << r;
      if (r == CUDA_SUCCESS) {
        ASSERT_CU(cuModuleUnload(module));  // only trailing bytes were lost
      }
      EXPECT_EQ(taken(), 0u);
    }
    // Corrupted bytes: through the linker, which is given the size.
    for (int round = 0; round < 400; ++round) {
      std::string damaged = image;
      const int flips = 1 + round % 4;
      for (int i = 0; i < flips; ++i) {
        // Mostly the headers, where a wrong byte misleads the most.
        const size_t span = round % 2 ? std::min<size_t>(damaged.size(), 256) : damaged.size();
        damaged[random() % span] = static_cast<char>(random());
      }
      const CUresult r =
          cuLinkAddData_v2(link, type, damaged.data(), damaged.size(), name, 0, nullptr, nullptr);
      EXPECT_TRUE(acceptable(r) || r == CUDA_ERROR_INVALID_VALUE) << name << ": " << r;
      if (r == CUDA_SUCCESS) {
        ASSERT_CU(cuLinkDestroy(link));
        ASSERT_CU(cuLinkCreate_v2(0, nullptr, nullptr, &link));
      }
    }
  }
  ASSERT_CU(cuLinkDestroy(link));
  // Damage the driver sees in memory too: magic, version, entry kinds, payload.
  const std::string fatbin = read_image("kernels_zstd.fatbin");
  uint16_t header = 0;
  std::memcpy(&header, fatbin.data() + 6, 2);
  auto refused = [&](size_t at, char value) {
    std::string damaged = fatbin;
    damaged[at] = value;
    CUmodule module = nullptr;
    return cuModuleLoadData(&module, damaged.data());
  };
  EXPECT_EQ(refused(4, 9), CUDA_ERROR_INVALID_IMAGE) << "fatbin version";
  EXPECT_EQ(refused(6, 8), CUDA_ERROR_INVALID_IMAGE) << "header size";
  EXPECT_EQ(refused(header + 4, 8), CUDA_ERROR_INVALID_IMAGE) << "entry header size";
  EXPECT_EQ(refused(header + 64, 0x55), CUDA_ERROR_INVALID_IMAGE) << "ZSTD frame";
  EXPECT_EQ(refused(header + 0, 7), CUDA_ERROR_NO_BINARY_FOR_GPU) << "unknown entry kind";
  CUmodule module = nullptr;
  EXPECT_EQ(cuModuleLoadData(&module, "not an image"), CUDA_ERROR_INVALID_IMAGE);
  const char* broken = ".version 8.0\n.target sm_90\n.visible .entry k(.param .u99 x)\n{\n}\n";
  EXPECT_EQ(cuModuleLoadData(&module, broken), CUDA_ERROR_INVALID_PTX);
  EXPECT_EQ(taken(), 0u);
}

// Found by fuzz/image_fuzzer: a name that is no PTX identifier was taken as
// it stood, so cuLinkComplete wrote PTX that no driver, the simulated one
// included, could load. The JIT compiler refuses such PTX.
TEST_F(Images, NamesThatAreNoPtxIdentifiersAreRefused) {
  const auto load = [](const std::string& declarations) {
    const std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n" + declarations;
    CUmodule module = nullptr;
    const CUresult result = cuModuleLoadData(&module, ptx.c_str());
    if (result == CUDA_SUCCESS) cuModuleUnload(module);
    return result;
  };
  EXPECT_EQ(load(".visible .entry spi[%rd2n_image(\n.param .u64 p\n)\n{\nret;\n}\n"),
            CUDA_ERROR_INVALID_PTX);
  EXPECT_EQ(load(".visible .entry 9lives()\n{\nret;\n}\n"), CUDA_ERROR_INVALID_PTX);
  EXPECT_EQ(load(".visible .entry k(.param .u32 a-b)\n{\nret;\n}\n"), CUDA_ERROR_INVALID_PTX);
  EXPECT_EQ(load(".global .u32 x.y = 1;\n"), CUDA_ERROR_INVALID_PTX);
  EXPECT_EQ(load(".global .u32 _ = 1;\n"), CUDA_ERROR_INVALID_PTX) << "'_' alone is no name";

  EXPECT_EQ(load(".global .u32 $x = 1;\n.global .u32 %y = 2;\n"
                 ".visible .entry _Z1kPf$1(.param .u64 _Z1kPf$1_param_0)\n{\nret;\n}\n"),
            CUDA_SUCCESS);
  EXPECT_EQ(taken(), 0u);
}

}  // namespace
}  // namespace fakecuda::test
