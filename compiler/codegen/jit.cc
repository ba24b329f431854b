// In-process execution of a compiled object through ORC's LLJIT.
#include <fmt/format.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Support/MemoryBuffer.h>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/llvm_init.h"
#include "compiler/runtime/kernel_runtime.h"

namespace tunefarm::codegen {

struct JitKernel::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

JitKernel::~JitKernel() = default;

StatusOr<std::unique_ptr<JitKernel>> JitKernel::create(const std::string& object, const std::string& entry) {
  init_llvm();
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) return internal_error("cannot start the JIT: " + llvm::toString(jit.takeError()));
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess((*jit)->getDataLayout().getGlobalPrefix());
  if (!gen) return internal_error("JIT symbol search: " + llvm::toString(gen.takeError()));
  auto& dylib = (*jit)->getMainJITDylib();
  dylib.addGenerator(std::move(*gen));
  // The kernel runtime is linked into this library; define its symbols directly so that they
  // resolve even when the executable itself never references them.
  auto& es = (*jit)->getExecutionSession();
  auto mangle = llvm::orc::MangleAndInterner(es, (*jit)->getDataLayout());
  auto flags = llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable;
  llvm::orc::SymbolMap runtime;
  runtime[mangle("tunefarm_parallel_launch")] = llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&tunefarm_parallel_launch), flags);
  runtime[mangle("tunefarm_workspace_alloc")] = llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&tunefarm_workspace_alloc), flags);
  runtime[mangle("tunefarm_workspace_free")] = llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&tunefarm_workspace_free), flags);
  if (auto err = dylib.define(llvm::orc::absoluteSymbols(std::move(runtime))))
    return internal_error("JIT: cannot define the runtime symbols: " + llvm::toString(std::move(err)));
  if (auto err = (*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object, entry)))
    return internal_error("JIT cannot load the object: " + llvm::toString(std::move(err)));
  auto sym = (*jit)->lookup(entry);
  if (!sym) return internal_error(fmt::format("JIT: entry '{}' not found: {}", entry, llvm::toString(sym.takeError())));
  std::unique_ptr<JitKernel> k(new JitKernel());
  k->fn_ = sym->toPtr<KernelFn>();
  k->impl_ = std::make_unique<Impl>();
  k->impl_->jit = std::move(*jit);
  return k;
}

}  // namespace tunefarm::codegen
