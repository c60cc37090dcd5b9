"""Tree ensembles published as their libraries save them: XGBoost (``.json``/``.ubj``),
LightGBM (``.txt``) and scikit-learn (``.skops``), never pickles.

A version is loaded by its library (``native``), converted to ONNX (``convert``) and
served by onnxruntime when the converted graph gives the original's predictions on the
check rows (the manifest's examples and a seeded sample); otherwise, or where no
converter takes the model, the library serves it itself. Either way the outputs are the
contract of ``native.TreeOutputs``. The files are parsed where every tenant file is: in
the model host and the validation sandbox (``runtime.execution``), never beside the
platform's credentials.

The package imports nothing heavy: the plugins are ``trees.format``'s classes, and
``availability`` answers what is installed without importing a library.
"""
