"""The torch.backends entry point of the chorus_torch wheel (PyTorch >= 2.5 backend autoload).

torch calls register() at the end of ``import torch``; an exception here would break
``import torch`` itself, so every failure becomes a warning and the backend is simply absent
(init_process_group(backend="chorus") then says "Invalid backend"). Kept outside the
chorus_torch package so that loading the entry point imports nothing that can fail.
"""


def register():
    try:
        # When the user imported chorus_torch first, its import of torch lands here with
        # chorus_torch half-initialised in sys.modules: this import returns it unchanged and
        # chorus_torch/__init__ finishes the registration itself.
        import chorus_torch  # noqa: F401
    except Exception as err:  # never raise into import torch
        import warnings
        warnings.warn("chorus_torch: backend 'chorus' not registered: %s" % err,
                      RuntimeWarning, stacklevel=2)
