print("hello from the template")
