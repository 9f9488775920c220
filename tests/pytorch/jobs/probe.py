"""What a PyTorch job sees of its GPU: availability, the device's name and
properties, torch.cuda.mem_get_info() before and after a first tensor, and
which allocator backend served it. Prints one JSON line."""

import json
import os

import torch


def main():
    available = torch.cuda.is_available()
    report = {"available": available, "torch": torch.__version__, "cuda": torch.version.cuda,
              "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    if available:
        props = torch.cuda.get_device_properties(0)
        report.update({
            "device_count": torch.cuda.device_count(),
            "name": torch.cuda.get_device_name(0),
            "capability": list(torch.cuda.get_device_capability(0)),
            "multi_processor_count": props.multi_processor_count,
            "total_memory": props.total_memory,
            "backend": torch.cuda.get_allocator_backend(),
        })
        free, total = torch.cuda.mem_get_info()
        x = torch.ones(64 << 20, dtype=torch.uint8, device="cuda")  # 64 MiB
        torch.cuda.synchronize()
        free_after, total_after = torch.cuda.mem_get_info()
        report.update({"free": free, "total": total, "free_after": free_after,
                       "total_after": total_after, "reserved": torch.cuda.memory_reserved(),
                       "tensor_bytes": x.numel()})
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
