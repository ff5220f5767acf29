/* header_c.c — chorus.h must compile as strict C99 (-std=c99 -Wall -Wextra -Werror
 * -pedantic) and every function it declares must be exported by libchorus: this program
 * takes the address of each one (a missing symbol fails the link) and calls a few that
 * need no communicator. */
#include <chorus.h>

#include <stdio.h>
#include <string.h>

typedef void (*any_fn)(void);

int main(void) {
  /* Every declaration, by address (casts between function pointer types are fine in C). */
  any_fn api[] = {
      (any_fn)chorusGetVersion,
      (any_fn)chorusGetErrorString,
      (any_fn)chorusGetLastError,
      (any_fn)chorusGetUniqueId,
      (any_fn)chorusCommInitRank,
      (any_fn)chorusCommInitRankConfig,
      (any_fn)chorusCommInitAll,
      (any_fn)chorusCommInitFromEnv,
      (any_fn)chorusCommSplit,
      (any_fn)chorusCommFinalize,
      (any_fn)chorusCommDestroy,
      (any_fn)chorusCommAbort,
      (any_fn)chorusCommGetAsyncError,
      (any_fn)chorusCommCount,
      (any_fn)chorusCommUserRank,
      (any_fn)chorusStreamCreate,
      (any_fn)chorusStreamSynchronize,
      (any_fn)chorusStreamQuery,
      (any_fn)chorusStreamDestroy,
      (any_fn)chorusStreamFromCuda,
      (any_fn)chorusRedOpCreatePreMulSum,
      (any_fn)chorusRedOpDestroy,
      (any_fn)chorusAllReduce,
      (any_fn)chorusBroadcast,
      (any_fn)chorusReduce,
      (any_fn)chorusAllGather,
      (any_fn)chorusReduceScatter,
      (any_fn)chorusScatter,
      (any_fn)chorusGather,
      (any_fn)chorusAllToAll,
      (any_fn)chorusBarrier,
      (any_fn)chorusSend,
      (any_fn)chorusRecv,
      (any_fn)chorusGroupStart,
      (any_fn)chorusGroupEnd,
      (any_fn)chorusGetLaunchInfo,
  };
  size_t i;
  int version = 0;
  chorusConfig_t config = CHORUS_CONFIG_INITIALIZER;
  chorusUniqueId id;
  chorusComm_t comm = NULL;
  chorusStream_t stream = NULL;
  chorusDataType_t dt = chorusBfloat16;
  chorusRedOp_t op = chorusAvg;
  chorusResult_t res;

  for (i = 0; i < sizeof api / sizeof api[0]; ++i) {
    if (api[i] == NULL) {
      fprintf(stderr, "api function %u is NULL\n", (unsigned)i);
      return 1;
    }
  }
  memset(&id, 0, sizeof id);
  (void)comm;
  (void)stream;
  (void)dt;
  (void)op;
  if (sizeof(chorusUniqueId) != CHORUS_UNIQUE_ID_BYTES) return 2;
  if (config.size != sizeof(chorusConfig_t) || config.magic != CHORUS_CONFIG_MAGIC ||
      config.version != CHORUS_VERSION_CODE || config.blocking != CHORUS_CONFIG_UNDEF_INT ||
      config.timeoutSeconds != CHORUS_CONFIG_UNDEF_INT || config.commName != NULL)
    return 3;
  res = chorusGetVersion(&version);
  if (res != chorusSuccess || version != CHORUS_VERSION_CODE) {
    fprintf(stderr, "chorusGetVersion: %d, version %d (header %d)\n", (int)res, version,
            CHORUS_VERSION_CODE);
    return 4;
  }
  if (chorusGetErrorString(chorusInvalidArgument) == NULL) return 5;
  printf("chorus.h as C99: ok, library version %d, %u functions linked\n", version,
         (unsigned)(sizeof api / sizeof api[0]));
  return 0;
}
