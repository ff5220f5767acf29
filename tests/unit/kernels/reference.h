// reference.h — an independent scalar reference for the kernel tests.
//
// Deliberately shares nothing with kernels/reduce.h: 16-bit floats are decoded with ldexp
// and rounded with nearbyint on exact doubles; float32 results come from double arithmetic
// and float64 results from __float128 (double rounding through a format with >= 2p+2 bits
// is innocuous for + * /, so these are the correctly rounded results).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "chorus.h"
#include "kernels/host/host_reduce.h"

namespace ref {

/// Exact value of a binary16 / bfloat16 (NaN for NaNs).
double halfToDouble(uint16_t h);
double bf16ToDouble(uint16_t b);
/// Round an exact double to binary16 / bfloat16: nearest, ties to even, overflow to inf.
/// NaN gives a quiet NaN (payload not modelled: tests compare NaNs by NaN-ness).
uint16_t doubleToHalf(double x);
uint16_t doubleToBf16(double x);

/// One element of any type, as raw little-endian bits.
using Bits = uint64_t;

size_t size(chorusDataType_t t);
bool isNaN(chorusDataType_t t, Bits v);
/// Equal bits, or both NaN.
bool same(chorusDataType_t t, Bits a, Bits b);
std::string show(chorusDataType_t t, Bits v);

/// a OP b with the documented semantics (wrapping ints, IEEE 754-2019 max/min, 16-bit
/// floats computed in float and rounded once).
Bits combine(chorusDataType_t t, chorus::kernels::ReduceKind k, Bits a, Bits b);
Bits divide(chorusDataType_t t, Bits a, int n);

}  // namespace ref
