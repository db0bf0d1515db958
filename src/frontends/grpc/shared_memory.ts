// The shared-memory extension's RPCs: SystemSharedMemory{Register,Status,Unregister}, and the
// CudaSharedMemory* ones answered as unsupported.
import type * as grpc from '@grpc/grpc-js';
import type { CoreApi } from '../../core/api.js';
import { ServalError } from '../../kernel/errors.js';
import type { GRPCInferenceServiceHandlers } from './generated/inference/GRPCInferenceService.js';
import type { SystemSharedMemoryRegisterRequest__Output } from './generated/inference/SystemSharedMemoryRegisterRequest.js';
import type { SystemSharedMemoryStatusRequest__Output } from './generated/inference/SystemSharedMemoryStatusRequest.js';
import type { SystemSharedMemoryStatusResponse } from './generated/inference/SystemSharedMemoryStatusResponse.js';
import type { SystemSharedMemoryUnregisterRequest__Output } from './generated/inference/SystemSharedMemoryUnregisterRequest.js';

/** The server's wrapper that maps every error of a handler through the one status table. */
type Unary = <Req, Res>(fn: (req: Req) => Res | Promise<Res>) => grpc.handleUnaryCall<Req, Res>;

type SharedMemoryHandlers = Pick<
  GRPCInferenceServiceHandlers,
  | 'SystemSharedMemoryStatus'
  | 'SystemSharedMemoryRegister'
  | 'SystemSharedMemoryUnregister'
  | 'CudaSharedMemoryStatus'
  | 'CudaSharedMemoryRegister'
  | 'CudaSharedMemoryUnregister'
>;

export function sharedMemoryHandlers(core: CoreApi, unary: Unary): SharedMemoryHandlers {
  // No GPU here, and the extension is not listed: status and register are refused. Unregister
  // has nothing to remove and succeeds, as on a Triton without GPUs: perf_analyzer unregisters
  // CUDA regions at the end of every --shared-memory run and reports a failure as an error.
  const cuda = unary((): never => {
    throw ServalError.unsupported('CUDA shared memory is not supported by this server');
  });
  return {
    // Triton's message: the regions keyed by name.
    SystemSharedMemoryStatus: unary(
      (r: SystemSharedMemoryStatusRequest__Output): SystemSharedMemoryStatusResponse => ({
        regions: Object.fromEntries(core.systemSharedMemoryStatus(r.name).map((s) => [s.name, s])),
      }),
    ),
    // uint64 fields arrive as decimal strings; past 2^53 the core refuses them as invalid args.
    SystemSharedMemoryRegister: unary((r: SystemSharedMemoryRegisterRequest__Output) => {
      core.registerSystemSharedMemory(r.name, r.key, Number(r.offset), Number(r.byte_size));
      return {};
    }),
    SystemSharedMemoryUnregister: unary(async (r: SystemSharedMemoryUnregisterRequest__Output) => {
      await core.unregisterSystemSharedMemory(r.name);
      return {};
    }),
    CudaSharedMemoryStatus: cuda,
    // Without --allow-client-shm, registration and unregistration are refused first, as Triton's.
    CudaSharedMemoryRegister: unary((): never => {
      core.checkClientSharedMemory?.();
      throw ServalError.unsupported('CUDA shared memory is not supported by this server');
    }),
    CudaSharedMemoryUnregister: unary(() => {
      core.checkClientSharedMemory?.();
      return {};
    }),
  };
}
