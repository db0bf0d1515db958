// One model instance: a worker thread owning one ONNX Runtime session. session.run blocks the
// thread that calls it, so it must never run on the main thread.
import { parentPort, workerData } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import { fromOrtType, splitBytes, joinBytes, typedView, type DataType } from '../../core/datatypes.js';
import type { ExecOutput, ExecRequest, ExecResult, IoSignature } from '../backend.js';
import type { FromWorker, SessionSettings, ToWorker } from './protocol.js';

const port = parentPort!;
const settings = workerData as SessionSettings;

function post(msg: FromWorker, transfer: ArrayBuffer[] = []): void {
  port.postMessage(msg, transfer);
}

function signatureOf(meta: readonly ort.InferenceSession.ValueMetadata[]): IoSignature[] {
  return meta.map((m) => {
    if (!m.isTensor) return { name: m.name, datatype: undefined, rawType: 'non-tensor', dims: undefined };
    return {
      name: m.name,
      datatype: fromOrtType(m.type),
      rawType: m.type,
      dims: m.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)),
    };
  });
}

function toTensor(req: ExecRequest, i: number): ort.Tensor {
  const slot = req.inputs[i]!;
  const bytes = new Uint8Array(req.buffer, slot.offset, slot.byteLength);
  if (slot.datatype === 'BYTES') {
    const strings = splitBytes(bytes, slot.name).map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8'));
    return new ort.Tensor('string', strings, slot.dims);
  }
  const type = ort_type(slot.datatype);
  return new ort.Tensor(type, typedView(slot.datatype, bytes) as never, slot.dims);
}

function ort_type(dt: Exclude<DataType, 'BYTES'>): Exclude<ort.Tensor.Type, 'string' | 'int4' | 'uint4'> {
  switch (dt) {
    case 'BOOL': return 'bool';
    case 'FP16': return 'float16';
    case 'FP32': return 'float32';
    case 'FP64': return 'float64';
    default: return dt.toLowerCase() as 'int32';
  }
}

function fromTensor(name: string, t: ort.Tensor, transfer: ArrayBuffer[]): ExecOutput {
  const datatype = fromOrtType(t.type);
  if (!datatype) throw new Error(`output '${name}' has ONNX type '${t.type}', which Serval cannot return`);
  const dims = [...t.dims];
  if (datatype === 'BYTES') {
    const bytes = joinBytes(t.data as string[]);
    const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    transfer.push(buffer);
    return { name, datatype, dims, buffer, offset: 0, byteLength: buffer.byteLength };
  }
  const view = t.data as ArrayBufferView;
  let buffer = view.buffer as ArrayBuffer;
  let offset = view.byteOffset;
  // Transfer the runtime's own buffer when it holds exactly this tensor; otherwise copy it out once.
  if (!(buffer instanceof ArrayBuffer) || transfer.includes(buffer) || offset !== 0 || view.byteLength !== buffer.byteLength) {
    buffer = buffer.slice(offset, offset + view.byteLength) as ArrayBuffer;
    offset = 0;
  }
  transfer.push(buffer);
  return { name, datatype, dims, buffer, offset, byteLength: view.byteLength };
}

async function main(): Promise<void> {
  const options: ort.InferenceSession.SessionOptions = {
    intraOpNumThreads: settings.intraOpThreads,
    interOpNumThreads: settings.interOpThreads,
    graphOptimizationLevel: settings.graphOptimizationLevel,
    executionProviders: settings.cudaDeviceId >= 0 ? [{ name: 'cuda', deviceId: settings.cudaDeviceId }] : ['cpu'],
  };
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(settings.modelPath, options);
  } catch (e) {
    post({ type: 'init-error', message: e instanceof Error ? e.message : String(e) });
    return;
  }
  post({
    type: 'ready',
    signature: { inputs: signatureOf(session.inputMetadata), outputs: signatureOf(session.outputMetadata) },
  });

  port.on('message', async (msg: ToWorker) => {
    if (msg.type === 'close') {
      await session.release().catch(() => undefined);
      port.close();
      return;
    }
    const { id, req } = msg;
    try {
      const t0 = process.hrtime.bigint();
      const feeds: Record<string, ort.Tensor> = {};
      for (let i = 0; i < req.inputs.length; i++) feeds[req.inputs[i]!.name] = toTensor(req, i);
      const t1 = process.hrtime.bigint();
      const fetched = await session.run(feeds, req.outputs);
      const t2 = process.hrtime.bigint();
      const transfer: ArrayBuffer[] = [];
      const outputs = req.outputs.map((name) => fromTensor(name, fetched[name]!, transfer));
      const t3 = process.hrtime.bigint();
      const result: ExecResult = {
        outputs,
        computeInputNs: Number(t1 - t0),
        computeInferNs: Number(t2 - t1),
        computeOutputNs: Number(t3 - t2),
      };
      post({ type: 'result', id, result }, transfer);
    } catch (e) {
      post({ type: 'exec-error', id, message: e instanceof Error ? e.message : String(e) });
    }
  });
}

void main();
