"""bls_trace: BLS calls into add_one_int32 / repeat_int32, traced or not; TEXT is a JSON report (hex)."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


def add_one(value, **kwargs):
    inputs = [pb_utils.Tensor("IN", np.array([value], dtype=np.int32))]
    request = pb_utils.InferenceRequest(model_name="add_one_int32", inputs=inputs, requested_output_names=["OUT"], **kwargs)
    response = request.exec()
    if response.has_error():
        return response.error().message()
    return pb_utils.get_output_tensor_by_name(response, "OUT").as_numpy().tolist()


def repeat(values, **kwargs):
    inputs = [
        pb_utils.Tensor("IN", np.array(values, dtype=np.int32)),
        pb_utils.Tensor("DELAY", np.zeros(len(values), dtype=np.uint32)),
        pb_utils.Tensor("WAIT", np.array([0], dtype=np.uint32)),
    ]
    request = pb_utils.InferenceRequest(model_name="repeat_int32", inputs=inputs, requested_output_names=["OUT"], **kwargs)
    return [pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy().tolist() for r in request.exec(decoupled=True) if r.output_tensors()]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy().reshape(-1)[0].decode()
            trace = request.trace()
            report = {
                "mode": mode,
                "type": type(trace).__name__,
                "public": sorted(a for a in dir(trace) if not a.startswith("_")),
                "context": repr(trace.get_context()),
            }
            try:
                if mode == "untraced":
                    report["out"] = [add_one(1, request_id="inner")]
                elif mode == "traced":
                    report["out"] = [add_one(1, request_id="inner", trace=trace)]
                elif mode == "traced_twice":
                    report["out"] = [add_one(1, request_id="inner", trace=trace), add_one(2, trace=trace)]
                elif mode == "stream_traced":
                    report["out"] = repeat([4, 2], trace=trace)
            except Exception as e:  # noqa: BLE001
                report["exception"] = f"{type(e).__name__}: {e}"
            # Hex: Triton's TENSORS trace writes BYTES elements unescaped, and JSON's quotes would break its file.
            text = np.array([json.dumps(report).encode().hex().encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("TEXT", text)]))
        return responses
