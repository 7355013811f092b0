// decode_grid.h - the decode-size grid of issue 44: the hidden sizes x token counts
// over which fc-bench (allreduce, arnorm: --grid) and the PyTorch benchmarks
// (tools/bench-torch-allreduce.py, tools/bench-torch-arnorm.py: --grid) time the
// small collectives beside TensorRT-LLM's kernels.
//
// hidden: the models' widths (Llama-3 8B 4096, 70B 8192, 405B 16384; Qwen2.5 3584,
// 5120; Mistral 12288; DeepSeek-V3 7168; small models 2048-3072), every one in the
// full grid, a spread of six in the short one. tokens: decode batches 1-2048,
// powers of two and the counts between them that are not (3, 17, 100, 255, 1000:
// rows that leave a partial chunk, pack or CTA wave), so that no choice is tuned at
// powers of two only.
//
// The same lists live in python/fusedcomm/bench.py (DECODE_GRIDS);
// tests/cpu/check_grid.py fails when the two differ.
#ifndef FC_TOOLS_DECODE_GRID_H_
#define FC_TOOLS_DECODE_GRID_H_

#include <cstring>

struct FcDecodeGrid {
  const char* name;
  const char* hidden;  // comma-separated
  const char* tokens;  // comma-separated
};

// grid: the short grid (the default of the grid runs: about a quarter of the cells).
inline constexpr FcDecodeGrid kFcDecodeGrids[] = {
    {"short", "2048,3584,4096,5120,8192,16384", "1,3,8,17,64,100,128,255,512,1000,2048"},
    {"full", "2048,2560,3072,3584,4096,5120,6144,7168,8192,12288,16384",
     "1,2,3,4,6,8,12,16,17,24,32,48,64,96,100,128,192,255,256,384,512,768,1000,1024,1536,2048"},
};

// The grid called `name`, or nullptr.
inline const FcDecodeGrid* fcDecodeGrid(const char* name) {
  for (const FcDecodeGrid& g : kFcDecodeGrids)
    if (std::strcmp(g.name, name) == 0) return &g;
  return nullptr;
}

#endif  // FC_TOOLS_DECODE_GRID_H_
