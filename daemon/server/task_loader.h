// Loads a task of the suite (configs/tasks/<name>/task.json) into the Task record the memory
// stores, so that OpenSession can name a task by its folder name. The evaluator reads the same
// folder itself; this only extracts what the memory needs (tolerances, FLOPs, bytes, hash).
// Thread-safety: free functions without shared state.
#pragma once

#include <map>
#include <string>

#include "base/status.h"
#include "htam/schema/htg_generated.h"

namespace htam::server {

// A task name is a folder name: letters, digits, '-', '_', '.', not starting with '.'.
bool IsTaskName(const std::string& name);

// NotFound when dir/task.json does not exist; InvalidArgument when it is malformed.
// FLOPs and bytes are evaluated at the first "seen" shape.
Result<fb::TaskT> LoadTaskDir(const std::string& dir);

// Evaluates an arithmetic expression over named dimensions: + - * / parentheses numbers names.
Result<double> EvalDimExpression(const std::string& expr,
                                 const std::map<std::string, double>& dims);

// The reference source of `backend` named in dir/task.json ("" when there is none).
std::string ReadReferenceSource(const std::string& dir, const std::string& backend);

}  // namespace htam::server
