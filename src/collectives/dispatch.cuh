// The two compile-time choices every collective launcher makes: the element type of
// an fcDataType_t, and the kernel instantiation for the world size (2, 4 and 8
// ranks get a compile-time rank count, so that the per-rank loads unroll and all go
// out before the first use; other sizes take the generic loop, NR = 0).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "core/result.h"
#include "fusedcomm.h"

namespace fc {

// f(T{}) with T the element type of `datatype`; fcInternalError for anything else
// (the API validated it before).
template <typename F>
fcResult_t withElementType(fcDataType_t datatype, const char* op, F&& f) {
  switch (datatype) {
    case fcFloat32: return f(float{});
    case fcFloat16: return f(__half{});
    case fcBfloat16: return f(__nv_bfloat16{});
  }
  return setError(fcInternalError, "%s: datatype %d", op, int(datatype));
}

// f(std::integral_constant<int, NR>{}) with NR = nranks for 2, 4, 8, else 0.
template <typename F>
auto byWorldSize(int nranks, F&& f) {
  return nranks == 2   ? f(std::integral_constant<int, 2>{})
         : nranks == 4 ? f(std::integral_constant<int, 4>{})
         : nranks == 8 ? f(std::integral_constant<int, 8>{})
                       : f(std::integral_constant<int, 0>{});
}

}  // namespace fc
