// A client for inference.GRPCInferenceService/ModelStreamInfer (bidirectional streaming), loaded
// from the project's proto files the way the server loads them. Responses are collected in
// arrival order; the test reads them, half-closes or cancels the call, and awaits its status.
import * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import { packageDefinition } from './grpc.js';

/** A ModelStreamInferResponse as proto-loader decodes it (int64 as strings, defaults filled). */
export interface StreamReply {
  error_message: string;
  infer_response: {
    model_name: string;
    model_version: string;
    id: string;
    parameters: Record<string, { bool_param?: boolean; parameter_choice?: string }>;
    outputs: { name: string; datatype: string; shape: string[] }[];
    raw_output_contents: Buffer[];
  } | null;
}

export interface InferStreamClient {
  /** Writes one ModelInferRequest on the stream. */
  send(req: Record<string, unknown>): void;
  /** Writes bytes that are not a protobuf message (for malformed-input tests). */
  sendRaw(bytes: Buffer): void;
  /** Every response received so far, in arrival order. */
  readonly replies: StreamReply[];
  /** Resolves once `n` responses in all have arrived (rejects if the call ends first). */
  waitFor(n: number, timeoutMs?: number): Promise<StreamReply[]>;
  /** Resolves once the responses so far satisfy `done` (rejects if the call ends first). */
  waitUntil(done: (replies: readonly StreamReply[]) => boolean, what: string, timeoutMs?: number): Promise<StreamReply[]>;
  /** Half-close: the client sends no more requests. */
  end(): void;
  cancel(): void;
  /** The call's final status (OK after a normal end). */
  readonly status: Promise<grpc.StatusObject>;
  close(): void;
}

let method: protoLoader.MethodDefinition<object, object> | undefined;

function streamMethod(): protoLoader.MethodDefinition<object, object> {
  if (!method) {
    const def = packageDefinition();
    const svc = def['inference.GRPCInferenceService'] as protoLoader.ServiceDefinition;
    method = svc.ModelStreamInfer as protoLoader.MethodDefinition<object, object>;
  }
  return method;
}

/** Opens a ModelStreamInfer call to `address`; a Buffer written with sendRaw goes out as it is. */
export function openInferStream(address: string, metadata = new grpc.Metadata()): InferStreamClient {
  const m = streamMethod();
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
  });
  const serialize = (v: object): Buffer => (Buffer.isBuffer(v) ? v : m.requestSerialize(v));
  const call = client.makeBidiStreamRequest(m.path, serialize, m.responseDeserialize, metadata, {});
  const replies: StreamReply[] = [];
  const waiters: {
    done: (r: readonly StreamReply[]) => boolean;
    what: string;
    resolve: (r: StreamReply[]) => void;
    reject: (e: Error) => void;
  }[] = [];
  let ended: grpc.StatusObject | undefined;
  const wake = (): void => {
    for (const w of [...waiters]) {
      if (w.done(replies)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(replies.slice());
      } else if (ended) {
        waiters.splice(waiters.indexOf(w), 1);
        w.reject(new Error(`the stream ended (${ended.code}: ${ended.details}) after ${replies.length} responses, before ${w.what}`));
      }
    }
  };
  const waitUntil = (done: (r: readonly StreamReply[]) => boolean, what: string, timeoutMs = 30_000): Promise<StreamReply[]> =>
    new Promise<StreamReply[]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what} (have ${replies.length} responses)`)), timeoutMs);
      waiters.push({
        done,
        what,
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      wake();
    });
  call.on('data', (r: StreamReply) => {
    replies.push(r);
    wake();
  });
  // A cancelled or failed call emits 'error' and then 'status'; the status is what tests read.
  call.on('error', () => undefined);
  const status = new Promise<grpc.StatusObject>((resolve) =>
    call.on('status', (s: grpc.StatusObject) => {
      ended = s;
      resolve(s);
      wake();
    }),
  );
  return {
    send: (req) => void call.write(req),
    sendRaw: (bytes) => void call.write(bytes),
    replies,
    waitFor: (n, timeoutMs) => waitUntil((r) => r.length >= n, `${n} responses`, timeoutMs),
    waitUntil,
    end: () => call.end(),
    cancel: () => call.cancel(),
    status,
    close: () => client.close(),
  };
}
