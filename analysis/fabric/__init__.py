"""What a fabric delivers: nccl-tests tables as calibration, predictions and baselines
(docs/model.md, "Fabrics")."""
