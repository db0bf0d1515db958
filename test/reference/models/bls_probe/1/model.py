"""bls_probe: BLS calls into the decoupled repeat_int32; reports each response it gets as JSON."""

import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


def describe(response):
    item = {"has_error": response.has_error(), "outputs": {}}
    if response.has_error():
        item["error"] = response.error().message()
    for tensor in response.output_tensors():
        item["outputs"][tensor.name()] = tensor.as_numpy().tolist()
    return item


def collect(start, timeout=3.0):
    """Iterates start()'s responses in a thread; a call that has not ended after timeout s is reported as hung."""
    seen, finished = [], threading.Event()

    def run():
        try:
            for r in start():
                seen.append(describe(r))
        except Exception as e:  # noqa: BLE001
            seen.append({"exception": f"{type(e).__name__}: {e}"})
        finished.set()

    threading.Thread(target=run, daemon=True).start()
    if not finished.wait(timeout):
        seen.append({"hung": f"no end of iteration within {timeout} s"})
    return list(seen)


def bls_request(values=(4, 2, 0, 1)):
    inputs = [
        pb_utils.Tensor("IN", np.array(values, dtype=np.int32)),
        pb_utils.Tensor("DELAY", np.zeros(len(values), dtype=np.uint32)),
        pb_utils.Tensor("WAIT", np.array([0], dtype=np.uint32)),
    ]
    return pb_utils.InferenceRequest(model_name="repeat_int32", inputs=inputs, requested_output_names=["OUT", "IDX"])


def probe_request(mode):
    inputs = [pb_utils.Tensor("MODE", np.array([mode.encode()], dtype=np.object_))]
    return pb_utils.InferenceRequest(model_name="decoupled_probe", inputs=inputs, requested_output_names=["OUT"])


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy().reshape(-1)[0].decode()
            report = {"mode": mode}
            try:
                if mode == "exec_decoupled":
                    result = bls_request().exec(decoupled=True)
                    report["type"] = type(result).__name__
                    report["responses"] = [describe(r) for r in result]
                elif mode == "async_exec_decoupled":
                    result = await bls_request().async_exec(decoupled=True)
                    report["type"] = type(result).__name__
                    report["has_aiter"] = hasattr(result, "__aiter__")
                    if hasattr(result, "__aiter__"):
                        report["responses"] = [describe(r) async for r in result]
                    else:
                        report["responses"] = [describe(r) for r in result]
                elif mode == "exec_decoupled_empty":
                    report["responses"] = collect(lambda: bls_request(()).exec(decoupled=True))
                elif mode.startswith("exec_probe_"):
                    # exec_probe_<decoupled_probe MODE>: e.g. exec_probe_error_after_first, exec_probe_raise
                    report["responses"] = collect(lambda: probe_request(mode[len("exec_probe_"):]).exec(decoupled=True))
                elif mode == "exec_nondecoupled":
                    result = bls_request().exec()
                    report["type"] = type(result).__name__
                    report["responses"] = [describe(result)]
                elif mode == "async_exec_nondecoupled":
                    result = await bls_request().async_exec()
                    report["type"] = type(result).__name__
                    report["responses"] = [describe(result)]
            except Exception as e:  # noqa: BLE001
                report["exception"] = f"{type(e).__name__}: {e}"
            text = np.array([json.dumps(report).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("TEXT", text)]))
        return responses
