"""The predicted model: α-β collective costs, NCCL's own model, the step model with what-ifs,
and its calibration on a run (docs/model.md). Pure functions over SI floats; `section` is the
only module that reads the store."""
