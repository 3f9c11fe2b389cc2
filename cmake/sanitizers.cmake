# BAKEOFF_SANITIZE=address,undefined (asan preset) or thread (tsan preset) instruments everything.
set(BAKEOFF_SANITIZE "" CACHE STRING "Comma-separated -fsanitize= list, empty for none")
if(BAKEOFF_SANITIZE)
  add_compile_options(-fsanitize=${BAKEOFF_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${BAKEOFF_SANITIZE})
endif()
