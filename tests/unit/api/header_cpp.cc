// header_cpp.cc — chorus.h must compile as C++ (-Wall -Wextra -Werror -pedantic), with
// C linkage for every function, usable in constant expressions where it declares constants.
#include <chorus.h>

#include <cstdio>
#include <type_traits>

static_assert(sizeof(chorusUniqueId) == CHORUS_UNIQUE_ID_BYTES, "unique id size");
static_assert(CHORUS_VERSION_CODE == CHORUS_MAJOR * 10000 + CHORUS_MINOR * 100 + CHORUS_PATCH,
              "version code");
static_assert(chorusNumResults == 10 && chorusSuccess == 0, "result values are fixed forever");
static_assert(std::is_same<decltype(&chorusAllReduce),
                           chorusResult_t (*)(const void*, void*, size_t, chorusDataType_t,
                                              chorusRedOp_t, chorusComm_t, chorusStream_t)>::value,
              "chorusAllReduce signature");

extern "C" {
typedef chorusResult_t (*c_linkage_version_fn)(int*);
}

int main() {
  c_linkage_version_fn fn = &chorusGetVersion;
  chorusConfig_t config = CHORUS_CONFIG_INITIALIZER;
  int version = 0;
  if (fn(&version) != chorusSuccess || version != CHORUS_VERSION_CODE) return 1;
  if (config.magic != CHORUS_CONFIG_MAGIC || config.size != sizeof(chorusConfig_t)) return 2;
  std::printf("chorus.h as C++: ok, library version %d\n", version);
  return 0;
}
