# BAKEOFF_SANITIZE=address,undefined (asan preset) or thread (tsan preset) instruments everything.
# -O1, as the sanitizers' own documentation advises: -O0 code under ASan ran the suite's CPU-bound
# tests several times slower for no extra finding; asserts stay on (the presets are Debug builds).
# GCC 12's -Wmaybe-uninitialized misfires on instrumented -O1 code (std::regex's std::function
# members, in libstdc++'s own headers); the release build keeps the warning.
set(BAKEOFF_SANITIZE "" CACHE STRING "Comma-separated -fsanitize= list, empty for none")
if(BAKEOFF_SANITIZE)
  add_compile_options(-O1 -fsanitize=${BAKEOFF_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  add_link_options(-fsanitize=${BAKEOFF_SANITIZE})
endif()
