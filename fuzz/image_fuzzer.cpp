// The images the simulated driver loads (tests/fakecuda/src/image.h):
// fatbins, with their LZ4 and ZSTD entries, cubins (CUDA ELF) and PTX text,
// read with read_image for devices of compute capability 8.0, 9.0 and 10.0
// as cuModuleLoadData and cuLinkAddData read them (bounded by the size the
// caller gives). Asserts that an image read has a parameter offset for
// every parameter size, and that the PTX the simulated linker writes for it
// (interface_ptx) reads back with the same kernels and variables; for PTX
// input, with the same parameter layout too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "fuzz_check.h"
#include "image.h"

namespace {

void check_image(const fakecuda::Image& image, bool from_ptx, unsigned major, unsigned minor) {
  for (const fakecuda::KernelImage& kernel : image.kernels)
    FUZZ_CHECK(kernel.param_sizes.size() == kernel.param_offsets.size());

  const std::string linked = fakecuda::interface_ptx(image, major, minor);
  fakecuda::Image again;
  const CUresult read = fakecuda::read_image(
      {reinterpret_cast<const unsigned char*>(linked.data()), linked.size(), true}, major, minor,
      &again);
  // A cubin may name its symbols as PTX cannot; PTX read once reads again.
  if (!from_ptx) return;
  FUZZ_CHECK(read == CUDA_SUCCESS);
  FUZZ_CHECK(again.kernels.size() == image.kernels.size());
  FUZZ_CHECK(again.globals.size() == image.globals.size());
  for (std::size_t k = 0; k < image.kernels.size(); ++k) {
    const fakecuda::KernelImage& kernel = image.kernels[k];
    FUZZ_CHECK(again.kernels[k].name == kernel.name);
    FUZZ_CHECK(again.kernels[k].param_offsets == kernel.param_offsets);
  }
  for (std::size_t g = 0; g < image.globals.size(); ++g) {
    FUZZ_CHECK(again.globals[g].name == image.globals[g].name);
    FUZZ_CHECK(again.globals[g].managed == image.globals[g].managed);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const fakecuda::ImageBytes bytes{data, size, true};
  const fakecuda::ImageKind kind = fakecuda::image_kind(bytes);
  for (const auto& [major, minor] : {std::pair{8u, 0u}, std::pair{9u, 0u}, std::pair{10u, 0u}}) {
    fakecuda::Image image;
    if (fakecuda::read_image(bytes, major, minor, &image) != CUDA_SUCCESS) continue;
    check_image(image, kind == fakecuda::ImageKind::kPtx, major, minor);
  }
  return 0;
}
