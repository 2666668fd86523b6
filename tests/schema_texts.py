"""Schema-file texts that tests in several folders write onto ``TRAJSCHEMA_PATH``."""

#: moe_routed as issue 16 declares it (dims from the model config, routes without bounds or
#: spread). Written onto TRAJSCHEMA_PATH it shadows the packaged file, so the tests that use it
#: hold whatever the packaged moe_routed says.
MOE_ROUTED = """\
name: moe_routed
extends: [text]
architectures: [Qwen3MoeForCausalLM, Qwen2MoeForCausalLM, DeepseekV3ForCausalLM, MixtralForCausalLM]
dims:
  experts: {min: 1, from_config: [num_experts, n_routed_experts, num_local_experts]}
  topk: {min: 1, from_config: num_experts_per_tok}
  layers: {min: 1, from_config: ["num_hidden_layers - first_k_dense_replace", num_hidden_layers]}
fields:
  routed_experts: {shape: [seq, layers, topk], dtype: [int16, int32, int64], min: 0, pad: 0}
"""
