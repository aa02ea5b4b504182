#pragma once
/// A move-only callable with a small inline buffer: captures up to kInlineBytes live inside the
/// object (no heap allocation); larger, over-aligned or throwing-move callables go to the heap.
/// The engine stores one per pending event, so the common case must not touch malloc.
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace lynx::sim {

template <typename Signature, std::size_t kInlineBytes = 48>
class InlineFunction;

/// Move-only `R(Args...)` callable; see the file comment.
template <typename R, typename... Args, std::size_t kInlineBytes>
class InlineFunction<R(Args...), kInlineBytes> {
  static constexpr std::size_t kAlign = alignof(std::max_align_t);

 public:
  /// True when a callable of type F is stored in the inline buffer (no allocation).
  template <typename F>
  static constexpr bool stores_inline = sizeof(F) <= kInlineBytes && alignof(F) <= kAlign &&
                                        std::is_nothrow_move_constructible_v<F>;

  InlineFunction() noexcept = default;
  InlineFunction(std::nullptr_t) noexcept {}  // NOLINT: implicit like std::function

  /// Wraps any callable invocable as R(Args...).
  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, InlineFunction> &&
                                        std::is_invocable_r_v<R, D&, Args...>>>
  InlineFunction(F&& callable) {  // NOLINT: implicit like std::function
    emplace<D>(std::forward<F>(callable));
  }

  InlineFunction(InlineFunction&& other) noexcept { take(other); }
  InlineFunction& operator=(InlineFunction&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { reset(); }

  /// Destroys the current callable (if any) and constructs a D from `args` in place.
  template <typename D, typename... CtorArgs>
  void emplace(CtorArgs&&... args) {
    reset();
    emplace_into_empty<D>(std::forward<CtorArgs>(args)...);
  }

  /// `emplace` for a function known to be empty (skips the reset): the event engine's slots.
  /// If D's constructor (or its allocation) throws, the function stays empty.
  template <typename D, typename... CtorArgs>
  void emplace_into_empty(CtorArgs&&... args) {
    if constexpr (stores_inline<D>) {
      ::new (static_cast<void*>(storage_)) D(std::forward<CtorArgs>(args)...);
      invoke_ = &invoke_inline<D>;
      // Trivially copyable closures (pointers, ints, times) relocate by memcpy, no manager.
      if constexpr (!(std::is_trivially_copyable_v<D> && std::is_trivially_destructible_v<D>)) {
        manage_ = &manage_inline<D>;
      }
    } else {
      D* heap_object = new D(std::forward<CtorArgs>(args)...);
      std::memcpy(storage_, &heap_object, sizeof(heap_object));
      invoke_ = &invoke_heap<D>;
      manage_ = &manage_heap<D>;
    }
  }

  /// Calls the stored callable; it must not be empty.
  R operator()(Args... args) { return invoke_(storage_, std::forward<Args>(args)...); }

  explicit operator bool() const noexcept { return invoke_ != nullptr; }

  /// Destroys the stored callable; the function becomes empty.
  void reset() noexcept {
    if (manage_ != nullptr) manage_(Op::kDestroy, storage_, nullptr);
    invoke_ = nullptr;
    manage_ = nullptr;
  }

 private:
  enum class Op { kMoveTo, kDestroy };
  using Invoker = R (*)(void*, Args&&...);
  using Manager = void (*)(Op, void* self, void* destination) noexcept;

  template <typename D>
  static R invoke_inline(void* self, Args&&... args) {
    return (*std::launder(static_cast<D*>(self)))(std::forward<Args>(args)...);
  }
  template <typename D>
  static R invoke_heap(void* self, Args&&... args) {
    D* heap_object = nullptr;
    std::memcpy(&heap_object, self, sizeof(heap_object));
    return (*heap_object)(std::forward<Args>(args)...);
  }
  template <typename D>
  static void manage_inline(Op op, void* self, void* destination) noexcept {
    D* object = std::launder(static_cast<D*>(self));
    if (op == Op::kMoveTo) ::new (destination) D(std::move(*object));
    object->~D();
  }
  template <typename D>
  static void manage_heap(Op op, void* self, void* destination) noexcept {
    if (op == Op::kMoveTo) {
      std::memcpy(destination, self, sizeof(D*));  // the pointer moves, the object stays
      return;
    }
    D* heap_object = nullptr;
    std::memcpy(&heap_object, self, sizeof(heap_object));
    delete heap_object;
  }

  void take(InlineFunction& other) noexcept {
    if (other.manage_ != nullptr) {
      other.manage_(Op::kMoveTo, other.storage_, storage_);
    } else if (other.invoke_ != nullptr) {
      std::memcpy(storage_, other.storage_, kInlineBytes);
    }
    invoke_ = other.invoke_;
    manage_ = other.manage_;
    other.invoke_ = nullptr;
    other.manage_ = nullptr;
  }

  alignas(kAlign) unsigned char storage_[kInlineBytes];
  Invoker invoke_ = nullptr;
  Manager manage_ = nullptr;  ///< null for empty or trivially relocatable inline callables
};

}  // namespace lynx::sim
