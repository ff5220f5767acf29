// reproducible.cc — see reproducible.h.
#include "src/comm/reproducible.h"

#include <cstddef>
#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/params.h"

namespace chorus {

int configReproducible(const chorusConfig_t* config) {
  const bool hasField =
      config != nullptr && config->size >= offsetof(chorusConfig_t, reproducible) + sizeof(int);
  return hasField ? config->reproducible : CHORUS_CONFIG_UNDEF_INT;
}

bool reproducibleRequested(const chorusConfig_t* config) {
  const int asked = configReproducible(config);
  if (asked != CHORUS_CONFIG_UNDEF_INT) return asked != 0;
  return paramInt(Param::Reproducible) != 0;
}

chorusResult_t commAgreeReproducible(chorusComm* comm, bool wanted) {
  const int n = comm->nranks;
  // Each rank's wish and its CHORUS_REPRO_SCHEDULE: ranks on different schedules would
  // wait for messages their peers never send.
  const std::string& schedText = paramString(Param::ReproSchedule);
  const int sched = orderedWayParse(schedText.c_str());
  if (sched == -3)
    CHORUS_FAIL(chorusInvalidUsage,
                "rank %d: CHORUS_REPRO_SCHEDULE=%s: expected auto, plan, swap, chain, chain8, "
                "rails, rails2 or random",
                comm->rank, schedText.c_str());
  std::vector<int32_t> all(2 * static_cast<size_t>(n), 0);
  all[2 * static_cast<size_t>(comm->rank)] = wanted ? 1 : 0;
  all[2 * static_cast<size_t>(comm->rank) + 1] = sched;
  if (n > 1) CHORUS_CHECK(comm->bootstrap->allGather(all.data(), 2 * sizeof(int32_t)));
  for (int r = 0; r < n; ++r)
    if (all[2 * static_cast<size_t>(r) + 1] != sched)
      CHORUS_FAIL(chorusInvalidUsage,
                  "rank %d: the ranks disagree on CHORUS_REPRO_SCHEDULE: rank %d asked for "
                  "%d, this rank for %s (%d); every rank of a communicator must ask for the "
                  "same",
                  comm->rank, r, all[2 * static_cast<size_t>(r) + 1], schedText.c_str(), sched);
  comm->tuning.reproSchedule = sched;
  comm->orderedWaysRng = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(comm->rank + 1);
  std::string on, off;
  for (int r = 0; r < n; ++r) {
    std::string& side = all[2 * static_cast<size_t>(r)] != 0 ? on : off;
    if (side.size() < 60) side += (side.empty() ? "" : ",") + std::to_string(r);
  }
  if (!on.empty() && !off.empty())
    CHORUS_FAIL(chorusInvalidUsage,
                "rank %d: the ranks disagree on reproducible mode (CHORUS_REPRODUCIBLE / "
                "chorusConfig_t.reproducible): ranks %s asked for 1, ranks %s for 0; every rank "
                "of a communicator must ask for the same",
                comm->rank, on.c_str(), off.c_str());
  comm->tuning.reproducible = wanted;
  if (wanted && comm->rank == 0)
    CHORUS_INFO(kLogInit,
                "reproducible mode: floating-point sums, products and averages add in rank "
                "order on %d ranks (docs/REPRODUCIBLE.md)",
                n);
  return chorusSuccess;
}

}  // namespace chorus
