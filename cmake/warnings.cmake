# Warning flags for project targets only (third-party headers are system includes).
function(bakeoff_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor)
  if(BAKEOFF_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
