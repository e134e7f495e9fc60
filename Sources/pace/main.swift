print("pace: not yet implemented")
