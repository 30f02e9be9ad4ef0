"""Decoding one image file into pixels, apart from the dataset formats that hold the files.

Takes bytes (or a path) and a `DecodePolicy` and gives (H, W, C) pixels with channel
names: Pillow for every allowed format, libjpeg-turbo and libpng fast paths where their
pixels are exactly Pillow's, and the resize / center-crop transforms of what the model sees.
"""
