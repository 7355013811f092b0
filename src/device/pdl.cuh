// Programmatic dependent launch (PDL), the device side. A kernel launched with
// programmatic stream serialization (collectives/launch.h, launchKernelEx with pdl)
// may start while the previous kernel on its stream is still finishing, so it must
// wait for that grid before it touches memory the grid (or anything before it) wrote;
// without PDL the wait returns at once. Used by the Lamport kernels, whose launch
// latency is a large share of their time (TensorRT-LLM's fused all-reduce kernels do
// the same).
#pragma once

namespace fc::dev {

// Wait until the previous grid on the stream has completed and its memory
// operations are visible (griddepcontrol.wait). Everything a kernel does before this
// may only compute from its arguments.
__device__ __forceinline__ void waitForPreviousGrid() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Let the next kernel on the stream launch (griddepcontrol.launch_dependents): it
// still waits for this grid's completion at its own waitForPreviousGrid, so this only
// moves its launch and prologue earlier.
__device__ __forceinline__ void allowDependentLaunch() { asm volatile("griddepcontrol.launch_dependents;"); }

}  // namespace fc::dev
