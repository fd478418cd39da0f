"""Example applications on seqbus."""
