// params.h — the one parameter registry.
//
// Every tunable is a CHORUS_* environment variable declared once in params.cc's table
// (name, default, one-line doc) and read once, the first time any is asked for. Nothing
// else in the library calls getenv for a tunable. docs/ENV.md lists the same table and a
// unit test keeps the two in step.
#pragma once

#include <cstdint>
#include <string>

namespace chorus {

enum class Param : int {
  Debug,               // CHORUS_DEBUG
  DebugSubsys,         // CHORUS_DEBUG_SUBSYS
  DebugFile,           // CHORUS_DEBUG_FILE
  TimeoutS,            // CHORUS_TIMEOUT_S
  BuffSize,            // CHORUS_BUFFSIZE
  ChunkSize,           // CHORUS_CHUNKSIZE
  FifoDepth,           // CHORUS_FIFO_DEPTH
  LlThreshold,         // CHORUS_LL_THRESHOLD
  TreeThreshold,       // CHORUS_TREE_THRESHOLD
  NtThreshold,         // CHORUS_NT_THRESHOLD
  Algo,                // CHORUS_ALGO
  Proto,               // CHORUS_PROTO
  AlgoStrict,          // CHORUS_ALGO_STRICT
  SpinNs,              // CHORUS_SPIN_NS
  HostId,              // CHORUS_HOSTID
  SocketIfname,        // CHORUS_SOCKET_IFNAME
  Init,                // CHORUS_INIT
  Secret,              // CHORUS_SECRET
  CheckPointers,       // CHORUS_CHECK_POINTERS
  KernelIsa,           // CHORUS_KERNEL_ISA
  Nsocks,              // CHORUS_NSOCKS
  SocketBuf,           // CHORUS_SOCKET_BUFSIZE
  ShmDisable,          // CHORUS_SHM_DISABLE
  TcpChunkSize,        // CHORUS_TCP_CHUNKSIZE
  InitServed,          // CHORUS_INIT_SERVED
  SlurmPortBase,       // CHORUS_SLURM_PORT_BASE
  FlightRecorderSize,  // CHORUS_FLIGHT_RECORDER_SIZE
  FlightRecorderDir,   // CHORUS_FLIGHT_RECORDER_DIR
  CheckMode,           // CHORUS_CHECK_MODE
  TopoFile,            // CHORUS_TOPO_FILE
  TopoDumpFile,        // CHORUS_TOPO_DUMP_FILE
  TuningFile,          // CHORUS_TUNING_FILE
  CudaDisable,         // CHORUS_CUDA_DISABLE
  CudaPieceBytes,      // CHORUS_CUDA_PIECE_BYTES
  CudaPath,            // CHORUS_CUDA_PATH
  CudaTwoShotBytes,    // CHORUS_CUDA_TWO_SHOT_BYTES
  IbDisable,           // CHORUS_IB_DISABLE
  IbHca,               // CHORUS_IB_HCA
  IbGidIndex,          // CHORUS_IB_GID_INDEX
  IbTimeout,           // CHORUS_IB_TIMEOUT
  IbRetryCnt,          // CHORUS_IB_RETRY_CNT
  IbSl,                // CHORUS_IB_SL
  IbTc,                // CHORUS_IB_TC
  IbRegCache,          // CHORUS_IB_REG_CACHE
  TcpBusyPollUs,       // CHORUS_TCP_BUSY_POLL_US
  TcpPollMaxBytes,     // CHORUS_TCP_POLL_MAX_BYTES
  SingleCopyBytes,     // CHORUS_SINGLE_COPY_THRESHOLD
  CmaDisable,          // CHORUS_CMA_DISABLE
  CmaMax,              // CHORUS_CMA_MAX
  TcpCongestion,       // CHORUS_TCP_CONGESTION
  SlotStores,          // CHORUS_SLOT_STORES
  SpinBusyNs,          // CHORUS_SPIN_BUSY_NS
  TcpPieceMin,         // CHORUS_TCP_PIECE_MIN
  TcpPairLane,         // CHORUS_TCP_PAIR_LANE
  TcpSendFromUser,     // CHORUS_TCP_SEND_FROM_USER
  SpinStreamNs,        // CHORUS_SPIN_STREAM_NS
  Reproducible,        // CHORUS_REPRODUCIBLE
  AsymFence,           // CHORUS_ASYM_FENCE
  PairCells,           // CHORUS_PAIR_CELLS
  CrowdBalance,        // CHORUS_CROWD_BALANCE
  ReproSchedule,       // CHORUS_REPRO_SCHEDULE
  Count
};

struct ParamInfo {
  const char* name;
  const char* defaultValue;
  const char* doc;
};

/// The registry's table, for docs and tests.
const ParamInfo* paramTable(int* count);

/// The value as given in the environment, or the default. Read once per process.
const std::string& paramString(Param p);
/// Integer value (accepts K/M/G suffixes); a malformed value logs a warning and uses the
/// default.
int64_t paramInt(Param p);

}  // namespace chorus
