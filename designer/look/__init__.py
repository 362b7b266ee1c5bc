"""The designer's shared look: themes, icons and its QSettings store. Imported by every layer above it; imports none of them."""
