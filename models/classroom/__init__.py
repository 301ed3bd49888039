"""The mathematics behind the classroom page: pure NumPy/PyTorch functions, no Streamlit.

Modules:
    steps: scaled dot-product attention one step at a time, and parsing typed matrices.
    real: the same steps for one head of a loaded model, from its own q, k, v hooks.
    costs: FLOPs of one attention layer and the size of the KV cache.
    sharing: which query heads share which key/value heads (MHA, GQA, MQA) and parameter counts.
    positions: sinusoidal encodings, RoPE, ALiBi, causal and sliding-window masks.
    failures: softmax saturation, the online softmax, memory traffic of naive vs tiled attention.
"""
