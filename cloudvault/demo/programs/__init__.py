"""Programs of the demo lab's tree (plotters, the A/B summarizer, bundle scripts), copied into it by demo/serving.py
and run by its reproduction recipes: real files so that ruff reads them."""
