#include "common/serving_thread.h"

namespace rdmad {
namespace {

thread_local bool t_serving = false;

}  // namespace

void MarkServingThread() { t_serving = true; }

bool OnServingThread() { return t_serving; }

}  // namespace rdmad
