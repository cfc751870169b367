// Example: one optimization loop against htamd with the C++ SDK.
//   htam-client-example [ENDPOINT] [TASK] [BACKEND] [SOURCE_FILE]
// Opens a session, asks for the next step, submits the candidate in SOURCE_FILE (or the task's
// reference when none is given) and prints the outcome; then closes the session.
#include <fstream>
#include <iostream>
#include <sstream>

#include "htam/client.h"

int main(int argc, char** argv) {
  htam::ClientOptions options;
  options.endpoint = argc > 1 ? argv[1] : "tcp://127.0.0.1:7878";
  options.client_name = "htam-client-example";
  options.on_progress = [](const htam::fb::ProgressT& p) {
    std::cerr << "job " << p.job_id << ": " << p.stage << " " << p.message << "\n";
  };
  auto client = htam::Client::Connect(options);
  if (!client.ok()) {
    std::cerr << "connect: " << client.status().ToString() << "\n";
    return 1;
  }
  std::cout << "htamd " << (*client)->server().server_version << ", backends:";
  for (auto& b : (*client)->server().backends) std::cout << " " << b;
  std::cout << "\n";

  htam::OpenSessionArgs open;
  open.task = argc > 2 ? argv[2] : "cpu_relu";
  open.backend = argc > 3 ? argv[3] : "cpu";
  open.budget = 4;
  open.model = "example";
  auto session = (*client)->OpenSession(open);
  if (!session.ok()) {
    std::cerr << "open session: " << session.status().ToString() << "\n";
    return 1;
  }
  const uint64_t sid = session->session->id;
  std::cout << "session " << sid << " on task " << session->session->task_name << "\n";

  auto step = (*client)->NextStep(sid);
  if (!step.ok()) {
    std::cerr << "next step: " << step.status().ToString() << "\n";
    return 1;
  }
  std::cout << "direction: " << step->direction->name << "\nwhy: " << step->why << "\n";
  for (auto& hit : step->strategies)
    std::cout << "  strategy " << hit->strategy->id << ": " << hit->strategy->title << "\n";

  std::string source = session->baseline_source;
  if (argc > 4) {
    std::ifstream in(argv[4]);
    std::stringstream ss;
    ss << in.rdbuf();
    source = ss.str();
  }
  htam::SubmitArgs submit;
  submit.session_id = sid;
  submit.source = source;
  submit.direction_id = step->direction->id;
  for (auto& hit : step->strategies) submit.strategy_ids.push_back(hit->strategy->id);
  submit.summary = "baseline resubmitted by the example";
  submit.progress = true;
  auto result = (*client)->SubmitAndWait(submit, std::chrono::minutes(10));
  if (!result.ok()) {
    std::cerr << "submit: " << result.status().ToString() << "\n";
  } else {
    std::cout << "outcome: " << htam::fb::EnumNameOutcomeStatus(result->status) << " speedup "
              << result->speedup << " (transition " << result->transition_id << ")\n";
    if (!result->diagnostics.empty()) std::cout << result->diagnostics << "\n";
  }
  auto closed = (*client)->CloseSession(sid);
  if (closed.ok()) std::cout << "closed after " << closed->steps << " step(s)\n";
  return result.ok() ? 0 : 1;
}
