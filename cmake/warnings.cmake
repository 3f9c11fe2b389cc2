# Warning flags for project targets only (third-party headers are system includes).
function(bakeoff_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wnon-virtual-dtor
    $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local>)
  if(BAKEOFF_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
