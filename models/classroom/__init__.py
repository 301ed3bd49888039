"""The mathematics behind the classroom page: pure NumPy/PyTorch functions, no Streamlit.

- :mod:`models.classroom.steps` -- scaled dot-product attention one step at a time, and parsing
  typed matrices;
- :mod:`models.classroom.real` -- the same steps for one head of a loaded model, from its own
  q, k, v;
- :mod:`models.classroom.costs` -- FLOPs of one attention layer and the size of the KV cache;
- :mod:`models.classroom.sharing` -- which query heads share which key/value heads (MHA, GQA,
  MQA) and parameter counts;
- :mod:`models.classroom.positions` -- sinusoidal encodings, RoPE, ALiBi, causal and
  sliding-window masks;
- :mod:`models.classroom.failures` -- softmax saturation, the online softmax, memory traffic of
  naive and tiled attention.
"""
