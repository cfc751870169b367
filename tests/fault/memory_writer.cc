// A write storm for the kill -9 test: records steps as fast as it can from two threads and, after
// each RecordStep/RecordSteps returns (the commit is synced), writes the acknowledged transition
// ids (8 bytes each) to the file descriptor given on the command line. Killed at random moments.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "daemon/memory/memory.h"

using namespace htam::memory;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s STORE_DIR ACK_FD SEED\n", argv[0]);
    return 2;
  }
  MemoryOptions o;
  o.dir = argv[1];
  o.map_size_mb = 1;  // small: map growth happens under the storm too
  o.snapshot_interval_s = 0;
  int fd = std::atoi(argv[2]);
  uint32_t seed = static_cast<uint32_t>(std::atoi(argv[3]));
  auto m = Memory::Open(o);
  if (!m.ok()) {
    std::fprintf(stderr, "writer: %s\n", m.status().ToString().c_str());
    return 1;
  }
  Memory& mem = **m;
  fb::TaskT task;
  task.name = "fault-" + std::to_string(seed % 3);
  task.category = "elementwise";
  task.bytes = 1 << 20;
  task.flops = 1 << 18;
  auto task_id = mem.PutTask(task);
  auto dirs = mem.ListDirections();
  if (!task_id.ok() || !dirs.ok() || dirs->empty()) return 1;
  auto ack = [&](uint64_t id) {
    if (::write(fd, &id, sizeof id) != sizeof id) std::_Exit(3);
  };
  auto worker = [&](uint32_t wseed) {
    std::mt19937 rng(wseed);
    auto session = mem.OpenSession(*task_id, rng() % 2 ? "cuda" : "hip", "sm_90", "fault", "m", 0);
    if (!session.ok()) std::_Exit(4);
    const fb::OutcomeStatus st[] = {fb::OutcomeStatus::Ok, fb::OutcomeStatus::Ok,
                                    fb::OutcomeStatus::CompileError, fb::OutcomeStatus::Incorrect,
                                    fb::OutcomeStatus::Crash};
    for (uint64_t k = 0;; ++k) {
      auto make = [&]() {
        StepInput in;
        in.session_id = session->id;
        in.direction_id = (*dirs)[rng() % dirs->size()].id;
        in.status = st[rng() % 5];
        in.speedup_after = in.status == fb::OutcomeStatus::Ok ? 0.5 + (rng() % 400) / 100.0 : 0;
        in.summary = "storm idea " + std::to_string(rng() % 40);
        in.verified = true;
        in.language = "cuda";
        in.source = "// source " + std::to_string(rng()) + std::string(rng() % 3000, 'x');
        in.state = StateInput{static_cast<fb::Bottleneck>(rng() % 5), std::nullopt, ""};
        return in;
      };
      if (k % 4 == 3) {
        auto r = mem.RecordSteps({make(), make(), make()});
        if (!r.ok()) std::_Exit(5);
        for (const auto& x : *r) ack(x.transition_id);
      } else {
        auto r = mem.RecordStep(make());
        if (!r.ok()) {
          std::fprintf(stderr, "writer: %s\n", r.status().ToString().c_str());
          std::_Exit(6);
        }
        ack(r->transition_id);
      }
    }
  };
  std::thread a(worker, seed * 2 + 1), b(worker, seed * 2 + 2);
  a.join();
  b.join();
  return 0;
}
