// WorkClock: what a job's limits count (work_clock.h).
#include "daemon/eval/work_clock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace htam::eval {
namespace {

using Clock = WorkClock::Clock;
using std::chrono::duration;
using std::chrono::seconds;

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return duration<double>(b - a).count();
}

TEST(WorkClockTest, DeclaredWaitsMoveTheDeadlineUpToTheWallBound) {
  WorkClock clock(getpid());
  const Clock::time_point start = Clock::now();
  const double before = SecondsBetween(start, clock.Deadline(start, seconds(2), 0, 10));
  EXPECT_NEAR(before, 2.0, 0.2);
  clock.BeginWait();
  EXPECT_TRUE(clock.waiting());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  clock.EndWait();
  const double after = SecondsBetween(start, clock.Deadline(start, seconds(2), 0, 10));
  EXPECT_GE(after, 2.25);  // the wait is not the job's time
  // Never past limit * wall_factor, whatever was excluded.
  EXPECT_LE(SecondsBetween(start, clock.Deadline(start, seconds(2), 0, 1.0)), 2.0 + 1e-6);
  // A later stage counts only what was excluded since it began.
  EXPECT_NEAR(SecondsBetween(start, clock.Deadline(start, seconds(2), clock.ExcludedSeconds(),
                                                   10)),
              2.0, 0.05);
}

TEST(WorkClockTest, AJobThatSleepsOrComputesAloneHasNothingExcluded) {
  // A child that sleeps (a hang without CPU) and one that computes with a core to itself: their
  // time is their own (no run-queue delay to speak of on an idle core, no declared wait).
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    usleep(400000);
    _exit(0);
  }
  WorkClock clock(child);
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    clock.Sample();
  }
  EXPECT_LT(clock.ExcludedSeconds(), 0.1);
  int st = 0;
  waitpid(child, &st, 0);
}

}  // namespace
}  // namespace htam::eval
