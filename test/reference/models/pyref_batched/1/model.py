"""Side-by-side probe of auto_complete_config with batching: no config.pbtxt; it declares a
batch size, dynamic batching and an optional input. OUT = IN * 2 (+ BIAS when given)."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [-1]})
        auto_complete_model_config.add_input({"name": "BIAS", "data_type": "TYPE_FP32", "dims": [1], "optional": True})
        auto_complete_model_config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [-1]})
        auto_complete_model_config.set_max_batch_size(8)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def execute(self, requests):
        responses = []
        for request in requests:
            out = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy() * 2
            bias = pb_utils.get_input_tensor_by_name(request, "BIAS")
            if bias is not None:
                out = out + bias.as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        return responses
