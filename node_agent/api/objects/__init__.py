"""Device profiles and accelerator requests over the API database."""
