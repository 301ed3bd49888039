"""Pure figure and HTML builders: plotly / altair figures, escaped token views; no Streamlit."""
