// Reading the images the driver loads: fatbins (and the wrapper that points
// at one), cubins (CUDA ELF) and PTX text. What the simulator keeps of an
// image is its interface: the kernels with their parameter layout, and the
// variables with their initial bytes. Code is never run.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fakecuda {

struct KernelImage {
  std::string name;
  std::vector<uint32_t> param_sizes;    // bytes of each parameter, in order
  std::vector<uint32_t> param_offsets;  // where each one lies in the parameter buffer
};

struct GlobalImage {
  std::string name;
  uint64_t size = 0;
  std::vector<unsigned char> init;  // initial bytes; anything beyond reads as zero
  bool managed = false;             // __managed__ (.attribute(.managed) in PTX)
};

// The entry the driver picked for one device, read.
struct Image {
  std::vector<KernelImage> kernels;
  std::vector<GlobalImage> globals;
  uint64_t code_bytes = 0;  // size of the chosen entry (decompressed)
};

// Where an image's bytes are. A pointer handed to cuModuleLoadData carries no
// size: its headers say how far it reaches (`bounded` false). A file, or
// cuLinkAddData's buffer, has a size that no header may exceed.
struct ImageBytes {
  const unsigned char* data = nullptr;
  size_t size = 0;
  bool bounded = false;
};

// The kinds an image can be, as cuLinkAddData names them.
enum class ImageKind { kUnknown, kFatbinWrapper, kFatbin, kCubin, kPtx };
ImageKind image_kind(ImageBytes bytes);

// Reads an image for a device of compute capability `cc_major`.`cc_minor`,
// choosing among a fatbin's entries as the driver does: the cubin of the
// device's major architecture with the highest minor not above the device's,
// else the newest PTX not above the device, else CUDA_ERROR_NO_BINARY_FOR_GPU.
// Unreadable images give CUDA_ERROR_INVALID_IMAGE (CUDA_ERROR_INVALID_PTX for
// text that declares itself PTX but does not parse).
CUresult read_image(ImageBytes bytes, unsigned cc_major, unsigned cc_minor, Image* out);

// PTX text holding `image`'s interface: each kernel with parameters at the
// same offsets, each variable with its initial bytes. cuLinkComplete's output.
std::string interface_ptx(const Image& image, unsigned cc_major, unsigned cc_minor);

// A kernel that takes its duration from its first argument (see launch.cpp).
bool is_timed_kernel(const KernelImage& kernel);

}  // namespace fakecuda
