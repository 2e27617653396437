// SieveQueue: the eviction order of SIEVE (Zhang et al., "SIEVE is simpler
// than LRU", NSDI '24) over entries the caller owns.
//
// Entries sit in a FIFO queue in the order they were inserted, newest at the
// head; each has a visited bit, clear on insertion and set by Touch (a use).
// To choose an entry to give up, a hand moves from the tail toward the head
// (wrapping round to the tail): a visited entry has its bit cleared and is
// passed over, the first unvisited one is chosen. The hand stays where it
// stopped, so the next choice goes on from there. A use costs one bit and
// no reordering (unlike LRU); an entry used once since the hand last passed
// survives one more round, so peers in steady use are kept over one-time
// ones; and each step of the hand either clears a bit some use set or ends
// the walk, so a choice costs O(1) amortized.
//
// Two refinements for the peer table: the caller's `classify` may say an
// entry cannot be given up at all (kKeep: the hand passes over it, clearing
// its bit) or should be given up whatever its bit says (kTake: a failed
// peer). Only entries the hand passes as kKeep cost more than O(1)
// amortized; a walk ends after two rounds, when nothing can be given up.
//
// Example:
//   SieveQueue<std::string> queue;
//   auto a = queue.Insert("a");
//   queue.Insert("b");
//   queue.Touch(a);                    // "a" is in use
//   auto victim = queue.Choose([](const std::string&) {
//     return SieveChoice::kIfUnvisited;
//   });                                // "b"; "a" lost its bit on the way
//   queue.Erase(*victim);
//
// Not thread-safe: the owner's lock guards it.
#ifndef RDMAD_DAEMON_PEER_SIEVE_QUEUE_H_
#define RDMAD_DAEMON_PEER_SIEVE_QUEUE_H_

#include <cstddef>
#include <iterator>
#include <list>
#include <optional>
#include <utility>

namespace rdmad::peer {

// What SieveQueue::Choose may do with one entry.
enum class SieveChoice {
  kKeep,         // never give it up now (in use)
  kIfUnvisited,  // give it up unless used since the hand last passed
  kTake,         // give it up now, used or not
};

template <typename T>
class SieveQueue {
  struct Node {
    T value;
    bool visited = false;
  };

 public:
  // Names one entry until it is erased (inserting and erasing others, and
  // moving the queue, leave it valid).
  using Handle = typename std::list<Node>::iterator;

  SieveQueue() = default;
  SieveQueue(const SieveQueue&) = delete;
  SieveQueue& operator=(const SieveQueue&) = delete;
  // Moving keeps handles valid (std::list moves its nodes, not copies).
  SieveQueue(SieveQueue&&) = default;
  SieveQueue& operator=(SieveQueue&&) = default;

  // At the head, unvisited.
  Handle Insert(T value) {
    nodes_.push_front(Node{std::move(value)});
    return nodes_.begin();
  }

  // A use of the entry.
  static void Touch(Handle h) { h->visited = true; }
  static bool Visited(Handle h) { return h->visited; }
  static const T& Value(Handle h) { return h->value; }

  void Erase(Handle h) {
    if (hand_.has_value() && *hand_ == h) {
      Advance();
      if (*hand_ == h) hand_.reset();  // it was the only entry
    }
    nodes_.erase(h);
  }

  // The entry to give up, by the rule in the file comment, or nullopt when
  // `classify` keeps every entry. Leaves the hand on the chosen entry (the
  // caller erases it, or not). `classify(const T&)` returns a SieveChoice.
  template <typename Classify>
  std::optional<Handle> Choose(Classify classify) {
    if (nodes_.empty()) return std::nullopt;
    if (!hand_.has_value()) hand_ = std::prev(nodes_.end());
    // Two rounds: the first may only clear bits, the second then finds
    // any entry that is not kept.
    for (size_t steps = 2 * nodes_.size(); steps > 0; --steps) {
      Node& node = **hand_;
      switch (classify(static_cast<const T&>(node.value))) {
        case SieveChoice::kTake:
          return *hand_;
        case SieveChoice::kIfUnvisited:
          if (!node.visited) return *hand_;
          break;
        case SieveChoice::kKeep:
          break;
      }
      node.visited = false;
      Advance();
    }
    return std::nullopt;
  }

  size_t size() const { return nodes_.size(); }
  bool empty() const { return nodes_.empty(); }

 private:
  // One step toward the head; from the head, back to the tail.
  void Advance() {
    if (*hand_ == nodes_.begin()) {
      hand_ = std::prev(nodes_.end());
    } else {
      --*hand_;
    }
  }

  std::list<Node> nodes_;  // head (newest) first
  // The next entry the hand looks at; none until the first Choose, and
  // once the queue empties.
  std::optional<Handle> hand_;
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_SIEVE_QUEUE_H_
