"""Generated protocol stubs; see runtime/plugin/gen.py."""
