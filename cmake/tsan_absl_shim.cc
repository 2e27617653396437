// ThreadSanitizer shim for the Debian abseil (RDMAD_TSAN builds only).
//
// Debian's libabsl_synchronization is not built with -fsanitize=thread, so
// TSan cannot see absl::Mutex, absl::CondVar or absl::Notification
// synchronize: every access to ABSL_GUARDED_BY data from two threads looks
// like a race. The linker wraps (-Wl,--wrap, see the top CMakeLists.txt) the
// calls our code makes to those functions and this file tells TSan what
// they do with its annotation interface, then calls the real ones. Calls
// inside abseil itself are untouched.
#include <sanitizer/tsan_interface.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"


using absl::CondVar;
using absl::Condition;
using absl::Duration;
using absl::Mutex;
using absl::Notification;

extern "C" {

void __real__ZN4absl7debian35Mutex4LockEv(Mutex*);
void __real__ZN4absl7debian35Mutex6UnlockEv(Mutex*);
void __real__ZN4absl7debian35Mutex10ReaderLockEv(Mutex*);
void __real__ZN4absl7debian35Mutex12ReaderUnlockEv(Mutex*);
bool __real__ZN4absl7debian35Mutex7TryLockEv(Mutex*);
bool __real__ZN4absl7debian35Mutex13ReaderTryLockEv(Mutex*);
void __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(Mutex*,
                                                           const Condition&);
bool __real__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    Mutex*, const Condition&, Duration);
bool __real__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
    Mutex*, const Condition&, absl::Time);
void __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar*, Mutex*);
bool __real__ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE(
    CondVar*, Mutex*, absl::Time);
bool __real__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(
    CondVar*, Mutex*, Duration);
void __real__ZN4absl7debian312Notification6NotifyEv(Notification*);
void __real__ZNK4absl7debian312Notification19WaitForNotificationEv(
    const Notification*);
bool __real__ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(
    const Notification*, Duration);
bool __real__ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE(
    const Notification*, absl::Time);

void __wrap__ZN4absl7debian35Mutex4LockEv(Mutex* mu) {
  __tsan_mutex_pre_lock(mu, 0);
  __real__ZN4absl7debian35Mutex4LockEv(mu);
  __tsan_mutex_post_lock(mu, 0, 0);
}
void __wrap__ZN4absl7debian35Mutex6UnlockEv(Mutex* mu) {
  __tsan_mutex_pre_unlock(mu, 0);
  __real__ZN4absl7debian35Mutex6UnlockEv(mu);
  __tsan_mutex_post_unlock(mu, 0);
}
void __wrap__ZN4absl7debian35Mutex10ReaderLockEv(Mutex* mu) {
  __tsan_mutex_pre_lock(mu, __tsan_mutex_read_lock);
  __real__ZN4absl7debian35Mutex10ReaderLockEv(mu);
  __tsan_mutex_post_lock(mu, __tsan_mutex_read_lock, 0);
}
void __wrap__ZN4absl7debian35Mutex12ReaderUnlockEv(Mutex* mu) {
  __tsan_mutex_pre_unlock(mu, __tsan_mutex_read_lock);
  __real__ZN4absl7debian35Mutex12ReaderUnlockEv(mu);
  __tsan_mutex_post_unlock(mu, __tsan_mutex_read_lock);
}
bool __wrap__ZN4absl7debian35Mutex7TryLockEv(Mutex* mu) {
  __tsan_mutex_pre_lock(mu, __tsan_mutex_try_lock);
  const bool ok = __real__ZN4absl7debian35Mutex7TryLockEv(mu);
  __tsan_mutex_post_lock(
      mu, __tsan_mutex_try_lock | (ok ? 0 : __tsan_mutex_try_lock_failed), 0);
  return ok;
}
bool __wrap__ZN4absl7debian35Mutex13ReaderTryLockEv(Mutex* mu) {
  const unsigned flags = __tsan_mutex_read_lock | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(mu, flags);
  const bool ok = __real__ZN4absl7debian35Mutex13ReaderTryLockEv(mu);
  __tsan_mutex_post_lock(mu, flags | (ok ? 0 : __tsan_mutex_try_lock_failed),
                         0);
  return ok;
}

// Waiting releases the mutex and takes it again before returning.
static void Released(Mutex* mu) {
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
}
static void Reacquired(Mutex* mu) {
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
}

void __wrap__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(
    Mutex* mu, const Condition& condition) {
  Released(mu);
  __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(mu, condition);
  Reacquired(mu);
}
bool __wrap__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    Mutex* mu, const Condition& condition, Duration timeout) {
  Released(mu);
  const bool ok =
      __real__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
          mu, condition, timeout);
  Reacquired(mu);
  return ok;
}
bool __wrap__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
    Mutex* mu, const Condition& condition, absl::Time deadline) {
  Released(mu);
  const bool ok =
      __real__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
          mu, condition, deadline);
  Reacquired(mu);
  return ok;
}
bool __wrap__ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE(
    CondVar* cv, Mutex* mu, absl::Time deadline) {
  Released(mu);
  const bool timed_out =
      __real__ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE(
          cv, mu, deadline);
  Reacquired(mu);
  return timed_out;
}
void __wrap__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar* cv,
                                                       Mutex* mu) {
  Released(mu);
  __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(cv, mu);
  Reacquired(mu);
}
bool __wrap__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(
    CondVar* cv, Mutex* mu, Duration timeout) {
  Released(mu);
  const bool timed_out =
      __real__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(
          cv, mu, timeout);
  Reacquired(mu);
  return timed_out;
}

// Notify happens before every return from WaitForNotification.
void __wrap__ZN4absl7debian312Notification6NotifyEv(Notification* n) {
  __tsan_release(n);
  __real__ZN4absl7debian312Notification6NotifyEv(n);
}
void __wrap__ZNK4absl7debian312Notification19WaitForNotificationEv(
    const Notification* n) {
  __real__ZNK4absl7debian312Notification19WaitForNotificationEv(n);
  __tsan_acquire(const_cast<Notification*>(n));
}
bool __wrap__ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(
    const Notification* n, Duration timeout) {
  const bool notified =
      __real__ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(
          n, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(n));
  return notified;
}
bool __wrap__ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE(
    const Notification* n, absl::Time deadline) {
  const bool notified =
      __real__ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE(
          n, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(n));
  return notified;
}

}  // extern "C"
